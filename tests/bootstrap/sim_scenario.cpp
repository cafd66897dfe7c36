// SPDX-License-Identifier: Apache-2.0
#include "sim_scenario.hpp"

#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <memory>

#include "bootstrap/peers.hpp"
#include "sim_memory.hpp"

namespace dtrain::bootstrap::sim {

namespace {

// A list generated entry by entry, never held as text; `edits` replace single entries.
class GeneratedList final : public EndpointList {
 public:
  GeneratedList(std::size_t count, int ranks_per_node, std::map<std::size_t, std::string> edits)
      : count_(count), ranks_per_node_(ranks_per_node), edits_(std::move(edits)) {}
  std::size_t count() const override { return count_; }
  void visit(std::size_t low, std::size_t high,
             const std::function<void(std::size_t, std::string_view)>& visit) const override {
    for (std::size_t i = low; i < std::min(high, count_); ++i) {
      const auto edit = edits_.find(i);
      if (edit != edits_.end()) {
        visit(i, edit->second);
      } else {
        const std::string entry = generated_entry(i, ranks_per_node_);
        visit(i, entry);
      }
    }
  }
  // XXH3 of the list's text, as scan_endpoint_list would compute it.
  std::uint64_t hash() const {
    XXH3_state_t* state = XXH3_createState();
    XXH3_64bits_reset(state);
    visit(0, count_, [&](std::size_t i, std::string_view entry) {
      if (i > 0) XXH3_64bits_update(state, ",", 1);
      XXH3_64bits_update(state, entry.data(), entry.size());
    });
    const auto hash = XXH3_64bits_digest(state);
    XXH3_freeState(state);
    return hash;
  }

 private:
  std::size_t count_;
  int ranks_per_node_;
  std::map<std::size_t, std::string> edits_;
};

Fingerprint standard_fingerprint() {
  return {"5d2578010225653f", "0.1.0", "Open MPI v4.1.4", "none", "none", "none", "none"};
}

}  // namespace

std::string generated_entry(std::size_t i, int ranks_per_node) {
  const std::size_t node = i / static_cast<std::size_t>(ranks_per_node);
  const std::size_t local = i % static_cast<std::size_t>(ranks_per_node);
  return "10." + std::to_string((node >> 16) & 255) + "." + std::to_string((node >> 8) & 255) +
         "." + std::to_string(node & 255) + ":" + std::to_string(29500 + local);
}

ScenarioResult run_scenario(const Scenario& scenario) {
  const auto wall_started = std::chrono::steady_clock::now();
  const int n = scenario.ranks;
  const int per_node = scenario.ranks_per_node;
  const int nodes = (n + per_node - 1) / per_node;
  const auto node_members = [n, per_node](int rank) {
    NodeMembers members;
    const int first = rank / per_node * per_node;
    for (int r = first; r < std::min(n, first + per_node); ++r) members.ranks.push_back(r);
    return members;
  };
  track_memory(n);
  ScenarioResult result;
  {
    World world(n, node_members);
    std::unique_ptr<GeneratedList> base;
    std::uint64_t base_hash = 0;
    {
      OwnerScope simulator(-1);
      base = std::make_unique<GeneratedList>(static_cast<std::size_t>(n), per_node,
                                             std::map<std::size_t, std::string>{});
      base_hash = base->hash();
    }
    std::vector<std::unique_ptr<GeneratedList>> edited(static_cast<std::size_t>(n));
    std::vector<std::size_t> probes(static_cast<std::size_t>(n), 0);
    for (int r = 0; r < n; ++r) {
      if (scenario.missing.contains(r)) continue;
      OwnerScope scope(r);
      RankFacts facts;
      const int node = r / per_node;
      facts.host = "node" + std::to_string(node + 1);
      const NodeMembers members = node_members(r);
      const GeneratedList* list = base.get();
      if (scenario.plugin && !scenario.without_plugin.contains(r)) {
        const auto local = static_cast<int>(
            std::find(members.ranks.begin(), members.ranks.end(), r) - members.ranks.begin());
        facts.env = {true, r, n, local, static_cast<int>(members.ranks.size()), node, nodes};
        if (const auto it = scenario.local_rank_claims.find(r);
            it != scenario.local_rank_claims.end()) {
          facts.env.local_rank = it->second;
        }
        if (const auto it = scenario.node_rank_claims.find(r);
            it != scenario.node_rank_claims.end()) {
          facts.env.node_rank = it->second;
        }
        if (scenario.nnodes_claim) facts.env.nnodes = *scenario.nnodes_claim;
        facts.list_hash = base_hash;
        if (const auto it = scenario.list_edits.find(r); it != scenario.list_edits.end()) {
          auto& own = edited[static_cast<std::size_t>(r)];
          own = std::make_unique<GeneratedList>(
              static_cast<std::size_t>(n), per_node,
              std::map<std::size_t, std::string>{
                  {static_cast<std::size_t>(it->second.first), it->second.second}});
          list = own.get();
          facts.list_hash = own->hash();
        }
        facts.list_count = list->count();
        facts.list_source = "DTRAIN_ENDPOINTS_FILE=/proc/self/fd/512";
        facts.list = list;
        std::vector<int> wanted = preflight_peers(r, n);
        wanted.push_back(r);
        for (int i : wanted) {
          list->visit(static_cast<std::size_t>(i), static_cast<std::size_t>(i) + 1,
                      [&](std::size_t index, std::string_view entry) {
                        facts.list_entries.emplace(index, std::string(entry));
                      });
        }
      }
      if (!scenario.split_type.contains(r)) facts.node = members;
      if (const auto it = scenario.problems.find(r); it != scenario.problems.end()) {
        facts.problems.push_back(it->second);
      }
      facts.fingerprint = standard_fingerprint();
      if (scenario.other_binary.contains(r)) facts.fingerprint.executable_hash = "809602959a6d4a58";
      facts.listen_endpoint = generated_entry(static_cast<std::size_t>(r), per_node);
      if (const auto it = scenario.listen_errors.find(r); it != scenario.listen_errors.end()) {
        facts.listen_errno = it->second;
      }
      ProtocolConfig config;
      config.allow_mismatch = scenario.allow_mismatch;
      config.timeout = scenario.timeout;
      config.deadline = world.now() + scenario.timeout;
      ProtocolHooks hooks;
      hooks.probe = [&scenario, &probes, r](const std::vector<ProbeTarget>& targets, bool) {
        std::vector<ProbeOutcome> outcomes;
        outcomes.reserve(targets.size());
        for (const auto& target : targets) {
          int error = 0;
          if (scenario.unreachable.contains({r, target.rank})) {
            error = ETIMEDOUT;
          } else if (scenario.listen_errors.contains(target.rank) &&
                     !scenario.impostors.contains(target.rank)) {
            error = ECONNREFUSED;
          }
          outcomes.push_back({target.rank, error});
        }
        probes[static_cast<std::size_t>(r)] += targets.size();
        return outcomes;
      };
      world.start(r, run_protocol(world.fabric(r), world.suspension(r), std::move(facts), config,
                                  std::move(hooks)));
    }
    world.run();
    result.aborted_by = world.aborted_by();
    for (int r = 0; r < n; ++r) {
      if (scenario.missing.contains(r)) {
        result.ranks.emplace_back();
        continue;
      }
      RankResult rank;
      rank.finished = world.outcome(r).has_value();
      if (rank.finished) rank.outcome = *world.outcome(r);
      rank.counts = world.counts(r);
      rank.probes = probes[static_cast<std::size_t>(r)];
      result.ranks.push_back(std::move(rank));
    }
  }
  stop_tracking_memory();
  result.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_started).count();
  return result;
}

}  // namespace dtrain::bootstrap::sim
