// SPDX-License-Identifier: Apache-2.0
#pragma once
// The step layout: which node runs which global rank. Pure: strings in, plain data out.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dtrain::core {

// Upper bounds that keep hostile counts from turning into huge allocations.
inline constexpr std::uint32_t kMaxNodes = 1u << 20;
inline constexpr std::uint32_t kMaxTasks = 1u << 24;

enum class DistributionKind { kBlock, kCyclic, kPlane, kArbitrary };

struct Distribution {
  DistributionKind kind = DistributionKind::kBlock;
  std::uint32_t plane_size = 0;  // only for kPlane
};

// Accepts what SLURM_DISTRIBUTION holds ("block", "cyclic:block", "plane", "arbitrary", ...)
// plus "plane=N". Only the node-level (first) part matters for rank placement.
// `plane_size` comes from SLURM_DIST_PLANESIZE when the text is just "plane".
Distribution parse_distribution(std::string_view text, std::string_view plane_size = {});
std::string to_string(const Distribution& dist);

// "4,2,1(x2)" -> {4,2,1,1}. `expected_nodes` bounds the expansion before it is allocated.
std::vector<std::uint32_t> parse_tasks_per_node(std::string_view text,
                                                std::uint32_t expected_nodes);

struct StepSpec {
  std::string nodelist;        // SLURM_STEP_NODELIST, e.g. "node[1-4]"
  std::string tasks_per_node;  // SLURM_STEP_TASKS_PER_NODE, e.g. "4,2,1(x2)"
  Distribution distribution;
  std::uint32_t nnodes = 0;
  std::uint32_t ntasks = 0;
  // Only for kArbitrary: host of each global rank, in rank order, as a hostlist with repeats.
  std::string arbitrary_hosts;
};

struct RankPlacement {
  std::uint32_t node = 0;        // index into StepLayout::hosts; also the node rank
  std::uint32_t local_rank = 0;  // position among the node's ranks
};

struct StepLayout {
  std::vector<std::string> hosts;                      // node index -> host name
  std::vector<RankPlacement> ranks;                    // global rank -> placement
  std::vector<std::vector<std::uint32_t>> node_ranks;  // node -> global ranks, local-rank order

  std::uint32_t world_size() const { return static_cast<std::uint32_t>(ranks.size()); }
  std::uint32_t node_count() const { return static_cast<std::uint32_t>(hosts.size()); }
  std::uint32_t local_world_size(std::uint32_t node) const {
    return static_cast<std::uint32_t>(node_ranks.at(node).size());
  }
};

// Throws dtrain::Error(kInvalidInput) for any inconsistent or malformed input.
StepLayout derive_layout(const StepSpec& spec);

// Compares the global ranks Slurm placed on `node` (in local-task order, `node` a node of the
// layout) with the derived ones. Throws dtrain::Error(kMismatch) naming both lists when they
// differ.
void check_local_ranks(const StepLayout& layout, std::uint32_t node,
                       const std::vector<std::uint32_t>& slurm_ranks);

std::string join_ranks(const std::vector<std::uint32_t>& ranks);

}  // namespace dtrain::core
