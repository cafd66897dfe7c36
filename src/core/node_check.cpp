// SPDX-License-Identifier: Apache-2.0
#include "core/node_check.hpp"

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
