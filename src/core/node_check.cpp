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

NodeCheckVerdict judge_gpus(const std::vector<GpuPresence>& gpus) {
  NodeCheckVerdict verdict;
  std::vector<std::string> gone;
  std::vector<std::string> silent;
  for (const auto& gpu : gpus) {
    if (!gpu.vendor) {
      gone.push_back(gpu.bus_id);
    } else if (*gpu.vendor == 0xffff) {
      silent.push_back(gpu.bus_id);
    }
  }
  if (gone.empty() && silent.empty()) return verdict;
  const auto list = [](const std::vector<std::string>& ids) {
    constexpr std::size_t kNamed = 3;
    std::string text;
    for (std::size_t i = 0; i < ids.size() && i < kNamed; ++i) {
      text += (i == 0 ? "" : ", ") + ids[i];
    }
    if (ids.size() > kNamed) text += ", ...";
    return text;
  };
  verdict.healthy = false;
  verdict.check = "gpu";
  verdict.detail = std::to_string(gone.size() + silent.size()) + " of " +
                   std::to_string(gpus.size()) + " GPUs slurmd found at start ";
  if (!silent.empty()) verdict.detail += "read 0xffff on the PCI bus (" + list(silent) + ")";
  if (!silent.empty() && !gone.empty()) verdict.detail += " or ";
  if (!gone.empty()) verdict.detail += "are gone from the PCI bus (" + list(gone) + ")";
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
