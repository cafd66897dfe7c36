// SPDX-License-Identifier: Apache-2.0
#include "core/node_check.hpp"

#include <algorithm>

namespace dtrain::core {
namespace {

// slurmctld keeps reasons of any length, but `sinfo -R` and most site tools show about a line.
constexpr std::size_t kMaxReasonBytes = 200;

}  // namespace

NodeCheckVerdict judge_fabric_link(const FabricLinkFacts& facts) {
  NodeCheckVerdict verdict;
  if (!facts.interface) {
    verdict.note = "node check: no interface of " + facts.node + " holds its fabric address " +
                   facts.address +
                   "; nothing checked (a suffix= that names another network is a "
                   "configuration problem, not this node's fault)";
    return verdict;
  }
  const std::string where = *facts.interface + " (" + facts.address + ")";
  const bool down = facts.operstate == "down" || facts.operstate == "lowerlayerdown" ||
                    facts.operstate == "notpresent";
  const bool no_carrier = facts.carrier && *facts.carrier == 0;
  if (!down && !no_carrier) return verdict;
  verdict.healthy = false;
  verdict.check = "fabric";
  verdict.detail = where + (no_carrier ? " has no carrier" : " is down") + ", operstate " +
                   (facts.operstate.empty() ? std::string("unknown") : facts.operstate);
  return verdict;
}

std::vector<std::string> reach_peers(const std::vector<std::string>& job_nodes,
                                     const std::string& self) {
  std::vector<std::string> peers;
  const auto at = std::find(job_nodes.begin(), job_nodes.end(), self);
  const std::size_t start =
      at == job_nodes.end() ? 0 : static_cast<std::size_t>(at - job_nodes.begin()) + 1;
  for (std::size_t i = 0; i < job_nodes.size() && peers.size() < kMaxReachPeers; ++i) {
    const std::string& node = job_nodes[(start + i) % job_nodes.size()];
    if (node != self && std::find(peers.begin(), peers.end(), node) == peers.end()) {
      peers.push_back(node);
    }
  }
  return peers;
}

NodeCheckVerdict judge_fabric_reach(const FabricReachFacts& facts) {
  NodeCheckVerdict verdict;
  std::size_t resolved = 0;
  std::size_t reached = 0;
  std::string names;
  for (const auto& peer : facts.peers) {
    if (peer.address.empty()) continue;
    ++resolved;
    if (peer.reachable) ++reached;
    names += (names.empty() ? "" : ", ") + peer.node;
  }
  const std::string where = facts.interface + " (" + facts.address + ")";
  if (resolved == 0) {
    verdict.note = "no other node of the job has a fabric address here (" +
                   std::to_string(facts.peers.size()) + " peers), reachability not checked";
    return verdict;
  }
  if (reached > 0) {
    verdict.note = where + " reached " + std::to_string(reached) + " of " +
                   std::to_string(resolved) + " peers' fabric addresses (" + names + ")";
    return verdict;
  }
  verdict.healthy = false;
  verdict.check = "fabric-reach";
  verdict.detail = where + " reached none of " + std::to_string(resolved) +
                   " peers' fabric addresses (" + names + ") within " +
                   std::to_string(facts.budget_ms) + " ms";
  return verdict;
}

std::string drain_reason(const NodeCheckVerdict& verdict, std::uint32_t job_id) {
  std::string reason = std::string(kDrainReasonPrefix) + verdict.check + ": " + verdict.detail;
  const std::string job = " (job " + std::to_string(job_id) + ")";
  if (reason.size() + job.size() > kMaxReasonBytes) {
    reason.resize(kMaxReasonBytes - job.size() - 3);
    reason += "...";
  }
  return reason + job;
}

bool may_set_drain_reason(const std::optional<std::string>& existing_reason) {
  return !existing_reason || existing_reason->empty();
}

}  // namespace dtrain::core
