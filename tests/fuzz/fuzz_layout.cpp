// SPDX-License-Identifier: Apache-2.0
// Fuzzes the step layout: hostlist expansion (libslurm), SLURM_STEP_TASKS_PER_NODE,
// SLURM_DISTRIBUTION and SLURM_GTIDS, as slurmstepd hands them to user_init.
//
// Input: newline-separated fields
//   0 SLURM_STEP_NODELIST      1 SLURM_STEP_TASKS_PER_NODE   2 SLURM_DISTRIBUTION
//   3 SLURM_DIST_PLANESIZE     4 node count (empty: the host list's count)
//   5 task count (empty: the sum of the tasks per node)       6 arbitrary host list
//   7 node index for SLURM_GTIDS (empty: 0)                   8 SLURM_GTIDS (empty: derived)
// Only dtrain::Error may escape the API; every layout it returns must be a bijection of ranks
// onto (node, local rank) that agrees with the counts and the distribution.

#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/hostlist.hpp"
#include "core/layout.hpp"
#include "core/parse.hpp"
#include "fuzz_support.hpp"

namespace {

using dtrain::core::DistributionKind;
using dtrain::core::StepLayout;
using dtrain::core::StepSpec;
using dtrain::fuzz::require;

// Well inside kMaxNodes/kMaxTasks; keeps one execution in the millisecond range so the fuzzer
// explores shapes rather than waiting on a million-host expansion the API already bounds.
constexpr std::uint32_t kNodeCap = 1u << 12;
constexpr std::uint32_t kTaskCap = 1u << 16;

void check_layout(const StepSpec& spec, const std::vector<std::uint32_t>& counts,
                  const StepLayout& layout) {
  require(layout.node_count() == spec.nnodes, "node count");
  require(layout.world_size() == spec.ntasks, "world size");
  require(layout.node_ranks.size() == spec.nnodes, "node_ranks size");
  std::uint64_t placed = 0;
  for (std::uint32_t node = 0; node < spec.nnodes; ++node) {
    const auto& mine = layout.node_ranks[node];
    require(mine.size() == counts[node], "ranks on a node differ from its task count",
            "node " + std::to_string(node));
    placed += mine.size();
    for (std::uint32_t local = 0; local < mine.size(); ++local) {
      const std::uint32_t rank = mine[local];
      require(rank < spec.ntasks, "rank out of range");
      require(layout.ranks[rank].node == node && layout.ranks[rank].local_rank == local,
              "ranks[] disagrees with node_ranks[]", "rank " + std::to_string(rank));
      if (local > 0 && spec.distribution.kind != DistributionKind::kArbitrary) {
        const std::uint32_t previous = mine[local - 1];
        const bool block = spec.distribution.kind == DistributionKind::kBlock;
        require(block ? rank == previous + 1 : rank > previous,
                "ranks of a node are not in distribution order", "node " + std::to_string(node));
      }
    }
  }
  // Every rank consistent with exactly one slot and as many slots as ranks: a bijection.
  require(placed == spec.ntasks, "placed ranks differ from the task count");
}

std::uint32_t parse_count(std::string_view field, const char* what, std::uint32_t cap) {
  return static_cast<std::uint32_t>(dtrain::core::parse_unsigned(field, what, 0, cap));
}

int run(const std::uint8_t* data, std::size_t size) {
  dtrain::fuzz::Fields fields(data, size);
  StepSpec spec;
  spec.nodelist = fields.next();
  spec.tasks_per_node = fields.next();
  const auto distribution = fields.next();
  const auto plane_size = fields.next();
  const auto nnodes_field = fields.next();
  const auto ntasks_field = fields.next();
  spec.arbitrary_hosts = fields.next();
  const auto node_field = fields.next();
  const auto gtids_field = fields.next();

  spec.distribution = dtrain::core::parse_distribution(distribution, plane_size);
  const auto round_trip =
      dtrain::core::parse_distribution(dtrain::core::to_string(spec.distribution));
  require(round_trip.kind == spec.distribution.kind &&
              round_trip.plane_size == spec.distribution.plane_size,
          "to_string(Distribution) does not parse back", std::string(distribution));

  spec.nnodes = nnodes_field.empty()
                    ? static_cast<std::uint32_t>(
                          dtrain::core::expand_hostlist(spec.nodelist, kNodeCap).size())
                    : parse_count(nnodes_field, "node count", kNodeCap);
  const auto counts = dtrain::core::parse_tasks_per_node(spec.tasks_per_node, spec.nnodes);
  require(counts.size() == spec.nnodes, "parse_tasks_per_node returned the wrong node count");
  const std::uint64_t sum = std::accumulate(counts.begin(), counts.end(), std::uint64_t{0});
  if (sum > kTaskCap) return -1;
  spec.ntasks = ntasks_field.empty() ? static_cast<std::uint32_t>(sum)
                                     : parse_count(ntasks_field, "task count", kTaskCap);

  const StepLayout layout = dtrain::core::derive_layout(spec);
  check_layout(spec, counts, layout);

  const std::uint32_t node =
      node_field.empty() ? 0 : parse_count(node_field, "node index", kNodeCap);
  const auto& derived = layout.node_ranks[node % spec.nnodes];
  // The list Slurm would give for this node must be accepted as is.
  dtrain::core::check_local_ranks(layout, node % spec.nnodes, derived);
  std::vector<std::uint32_t> other(gtids_field.begin(), gtids_field.end());
  dtrain::core::check_local_ranks(layout, node % spec.nnodes,
                                  gtids_field.empty() ? derived : other);
  return 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    return run(data, size);
  } catch (const dtrain::Error&) {
    return 0;
  }
}
