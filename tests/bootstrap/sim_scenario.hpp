// SPDX-License-Identifier: Apache-2.0
#pragma once
// A step of n ranks for the simulation (sim_fabric.hpp): the plugin's variables as it sets them
// for nodes of `ranks_per_node` ranks, a generated endpoint list (node addresses 10.x.y.z,
// ports 29500 + local rank), and the faults of a scenario. run_scenario() builds every rank's
// RankFacts as the bootstrap would, runs the protocol (bootstrap/agreement.hpp) for all of them
// and returns what each rank ended with and what it sent, received, decoded and allocated.

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "bootstrap/agreement.hpp"
#include "sim_fabric.hpp"

namespace dtrain::bootstrap::sim {

struct Scenario {
  int ranks = 8;
  int ranks_per_node = 4;
  bool plugin = true;            // false: no DTRAIN_* variables at all
  std::set<int> without_plugin;  // ranks launched without the plugin's variables
  std::chrono::milliseconds timeout{60'000};
  bool allow_mismatch = false;
  std::set<int> missing;                                  // ranks that never start
  std::set<int> other_binary;                             // a different executable hash
  std::map<int, std::string> problems;                    // rank -> a problem found on its own
  std::map<int, int> local_rank_claims;                   // rank -> DTRAIN_LOCAL_RANK
  std::map<int, int> node_rank_claims;                    // rank -> DTRAIN_NODE_RANK
  std::optional<int> nnodes_claim;                        // DTRAIN_NNODES on every rank
  std::map<int, std::pair<int, std::string>> list_edits;  // rank -> (entry, new text)
  std::map<int, int> listen_errors;                       // rank -> errno of its listen
  std::set<int> impostors;                                // listen-failed ranks whose port answers
  std::set<std::pair<int, int>> unreachable;              // (source, target) probes that time out
  std::set<int> split_type;  // ranks whose launcher says nothing of nodes
};

struct RankResult {
  bool finished = false;  // false: still waiting when another rank ended the job
  Outcome outcome;
  RankCounts counts;
  std::size_t probes = 0;
};

struct ScenarioResult {
  std::vector<std::optional<RankResult>> ranks;  // nullopt: a missing rank
  std::optional<int> aborted_by;
  double seconds = 0;  // wall time of the simulation itself

  const Outcome& outcome(int rank) const {
    return ranks.at(static_cast<std::size_t>(rank))->outcome;
  }
};

ScenarioResult run_scenario(const Scenario& scenario);

// The generated list's entry `i` for nodes of `ranks_per_node` ranks.
std::string generated_entry(std::size_t i, int ranks_per_node);

}  // namespace dtrain::bootstrap::sim
