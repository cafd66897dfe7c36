// SPDX-License-Identifier: Apache-2.0
#include "core/layout.hpp"

#include <algorithm>
#include <unordered_map>

#include "core/error.hpp"
#include "core/hostlist.hpp"
#include "core/parse.hpp"

namespace dtrain::core {

Distribution parse_distribution(std::string_view text, std::string_view plane_size) {
  require_length(text, "distribution", 256);
  // Slurm writes "block", "cyclic:cyclic", "plane", "block,pack", "(null)" when unset, and a bare
  // "pack" or "nopack" (proc_args.c set_distribution) when only the flag is set, as under
  // CR_Pack_Nodes without -m; its layout is then block (slurm_step_layout.c).
  std::string_view node_level = text.substr(0, text.find_first_of(":,"));
  if (text.empty() || text == "(null)" || node_level == "block" || node_level == "*" ||
      node_level == "pack" || node_level == "nopack") {
    return {DistributionKind::kBlock, 0};
  }
  if (node_level == "cyclic") return {DistributionKind::kCyclic, 0};
  if (node_level == "arbitrary") return {DistributionKind::kArbitrary, 0};
  if (node_level.starts_with("plane")) {
    std::string_view size = plane_size;
    if (node_level.size() > 5) {
      if (node_level[5] != '=') {
        throw_invalid("distribution " + quote_for_error(text) +
                      " is not valid; use block, cyclic, plane=N or arbitrary");
      }
      size = node_level.substr(6);
    }
    if (size.empty()) {
      throw_invalid("distribution 'plane' needs a size: use plane=N or set SLURM_DIST_PLANESIZE");
    }
    const auto n = parse_unsigned(size, "plane size", 1, kMaxTasks);
    return {DistributionKind::kPlane, static_cast<std::uint32_t>(n)};
  }
  throw_invalid("distribution " + quote_for_error(text) +
                " is not valid; use block, cyclic, plane=N or arbitrary");
}

std::string to_string(const Distribution& dist) {
  switch (dist.kind) {
    case DistributionKind::kBlock:
      return "block";
    case DistributionKind::kCyclic:
      return "cyclic";
    case DistributionKind::kPlane:
      return "plane=" + std::to_string(dist.plane_size);
    case DistributionKind::kArbitrary:
      return "arbitrary";
  }
  return "unknown";
}

std::vector<std::uint32_t> parse_tasks_per_node(std::string_view text,
                                                std::uint32_t expected_nodes) {
  require_length(text, "tasks per node");
  if (text.empty()) throw_invalid("tasks per node is empty");
  struct Run {
    std::uint32_t tasks;
    std::uint32_t repeat;
  };
  std::vector<Run> runs;
  std::uint64_t total_nodes = 0;
  for (std::string_view item : split(text, ',')) {
    std::uint32_t repeat = 1;
    std::string_view count = item;
    if (const auto open = item.find('('); open != std::string_view::npos) {
      if (!item.ends_with(")") || item.substr(open).size() < 4 || item[open + 1] != 'x') {
        throw_invalid("tasks per node " + quote_for_error(text) + ": malformed item " +
                      quote_for_error(item) + "; expected N or N(xM)");
      }
      count = item.substr(0, open);
      const auto rep = item.substr(open + 2, item.size() - open - 3);
      repeat = static_cast<std::uint32_t>(
          parse_unsigned(rep, "tasks per node repeat count", 1, kMaxNodes));
    }
    const auto tasks =
        static_cast<std::uint32_t>(parse_unsigned(count, "tasks per node count", 1, kMaxTasks));
    total_nodes += repeat;
    if (total_nodes > expected_nodes) {
      throw_invalid("tasks per node " + quote_for_error(text) + " describes more than the " +
                    std::to_string(expected_nodes) + " nodes of the step");
    }
    runs.push_back({tasks, repeat});
  }
  if (total_nodes != expected_nodes) {
    throw_invalid("tasks per node " + quote_for_error(text) + " describes " +
                  std::to_string(total_nodes) + " nodes but the step has " +
                  std::to_string(expected_nodes));
  }
  std::vector<std::uint32_t> counts;
  counts.reserve(total_nodes);
  for (const Run& run : runs) counts.insert(counts.end(), run.repeat, run.tasks);
  return counts;
}

namespace {

// Round-robin over the nodes that still have room, taking `chunk` ranks at a time.
// Exhausted nodes are dropped from the rotation so the cost stays linear in ranks + nodes.
void place_round_robin(const std::vector<std::uint32_t>& counts, std::uint32_t chunk,
                       StepLayout& layout) {
  std::vector<std::uint32_t> active(counts.size());
  for (std::uint32_t i = 0; i < active.size(); ++i) active[i] = i;
  std::uint32_t rank = 0;
  while (!active.empty()) {
    std::size_t kept = 0;
    for (std::uint32_t node : active) {
      auto& mine = layout.node_ranks[node];
      const std::uint32_t room = counts[node] - static_cast<std::uint32_t>(mine.size());
      const std::uint32_t take = std::min(chunk, room);
      for (std::uint32_t i = 0; i < take; ++i) mine.push_back(rank++);
      if (take < room) active[kept++] = node;
    }
    active.resize(kept);
  }
}

void place_arbitrary(const StepSpec& spec, const std::vector<std::uint32_t>& counts,
                     StepLayout& layout) {
  if (spec.arbitrary_hosts.empty()) {
    throw_invalid("distribution 'arbitrary' needs the host of every rank (an explicit host list)");
  }
  const auto per_rank = expand_hostlist(spec.arbitrary_hosts, spec.ntasks);
  if (per_rank.size() != spec.ntasks) {
    throw_invalid("arbitrary host list names " + std::to_string(per_rank.size()) +
                  " ranks but the step has " + std::to_string(spec.ntasks) + " tasks");
  }
  std::unordered_map<std::string_view, std::uint32_t> index;
  index.reserve(layout.hosts.size());
  for (std::uint32_t i = 0; i < layout.hosts.size(); ++i) index.emplace(layout.hosts[i], i);
  for (std::uint32_t rank = 0; rank < per_rank.size(); ++rank) {
    const auto it = index.find(per_rank[rank]);
    if (it == index.end()) {
      throw_invalid("arbitrary host list puts rank " + std::to_string(rank) + " on " +
                    quote_for_error(per_rank[rank]) + ", which is not in the step node list");
    }
    layout.node_ranks[it->second].push_back(rank);
  }
  for (std::uint32_t node = 0; node < counts.size(); ++node) {
    if (layout.node_ranks[node].size() != counts[node]) {
      throw_invalid("arbitrary host list puts " + std::to_string(layout.node_ranks[node].size()) +
                    " ranks on " + layout.hosts[node] + " but the tasks per node say " +
                    std::to_string(counts[node]));
    }
  }
}

}  // namespace

StepLayout derive_layout(const StepSpec& spec) {
  if (spec.nnodes == 0 || spec.nnodes > kMaxNodes) {
    throw_invalid("node count " + std::to_string(spec.nnodes) + " is out of range (1.." +
                  std::to_string(kMaxNodes) + ")");
  }
  if (spec.ntasks == 0 || spec.ntasks > kMaxTasks) {
    throw_invalid("task count " + std::to_string(spec.ntasks) + " is out of range (1.." +
                  std::to_string(kMaxTasks) + ")");
  }
  StepLayout layout;
  layout.hosts = expand_hostlist(spec.nodelist, spec.nnodes);
  if (layout.hosts.size() != spec.nnodes) {
    throw_invalid("node list " + quote_for_error(spec.nodelist) + " names " +
                  std::to_string(layout.hosts.size()) + " hosts but the step has " +
                  std::to_string(spec.nnodes) + " nodes");
  }
  const auto counts = parse_tasks_per_node(spec.tasks_per_node, spec.nnodes);
  std::uint64_t total = 0;
  for (auto c : counts) total += c;
  if (total != spec.ntasks) {
    throw_invalid("tasks per node " + quote_for_error(spec.tasks_per_node) + " add up to " +
                  std::to_string(total) + " tasks but the step has " + std::to_string(spec.ntasks));
  }

  layout.node_ranks.resize(spec.nnodes);
  for (std::uint32_t node = 0; node < spec.nnodes; ++node) {
    layout.node_ranks[node].reserve(counts[node]);
  }
  switch (spec.distribution.kind) {
    case DistributionKind::kBlock: {
      std::uint32_t rank = 0;
      for (std::uint32_t node = 0; node < spec.nnodes; ++node) {
        for (std::uint32_t i = 0; i < counts[node]; ++i) layout.node_ranks[node].push_back(rank++);
      }
      break;
    }
    case DistributionKind::kCyclic:
      place_round_robin(counts, 1, layout);
      break;
    case DistributionKind::kPlane:
      if (spec.distribution.plane_size == 0) throw_invalid("plane size must be at least 1");
      place_round_robin(counts, spec.distribution.plane_size, layout);
      break;
    case DistributionKind::kArbitrary:
      place_arbitrary(spec, counts, layout);
      break;
  }

  layout.ranks.resize(spec.ntasks);
  for (std::uint32_t node = 0; node < spec.nnodes; ++node) {
    const auto& mine = layout.node_ranks[node];
    for (std::uint32_t local = 0; local < mine.size(); ++local) {
      layout.ranks[mine[local]] = RankPlacement{node, local};
    }
  }
  return layout;
}

std::string join_ranks(const std::vector<std::uint32_t>& ranks) {
  std::string out;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(ranks[i]);
  }
  return out;
}

void check_local_ranks(const StepLayout& layout, std::uint32_t node,
                       const std::vector<std::uint32_t>& slurm_ranks) {
  const auto& derived = layout.node_ranks.at(node);
  if (slurm_ranks != derived) {
    throw Error(ErrorKind::kMismatch,
                "layout mismatch on " + layout.hosts[node] + ": Slurm placed global ranks [" +
                    join_ranks(slurm_ranks) + "] here (SLURM_GTIDS) but dtrain derived [" +
                    join_ranks(derived) +
                    "]; check SLURM_DISTRIBUTION, or report this step's srun options");
  }
}

}  // namespace dtrain::core
