// SPDX-License-Identifier: Apache-2.0
#include "spank/slurmd_epilog_node_check.hpp"

#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "core/config.hpp"
#include "core/error.hpp"
#include "core/net_io.hpp"
#include "core/node_check.hpp"
#include "core/parse.hpp"
#include "spank/spank_io.hpp"

namespace dtrain::spank {
namespace {

// SHOW_ALL (nodes in hidden partitions too) and NODE_STATE_DRAIN (SLURM_BIT(9) in every release
// since 22.05), written out since 24.11's SLURM_BIT is an old-style cast.
constexpr std::uint16_t kShowAll = 1;
constexpr std::uint32_t kNodeStateDrain = 1U << 9;

// slurmd sets SLURMD_NODENAME and SLURM_JOB_ID in the epilog's environment
// (src/plugins/prep/script/prep_script_slurmd.c); they come from slurmd, not from the job.
std::string node_name() {
  const char* name = std::getenv("SLURMD_NODENAME");
  std::string text = name ? name : "";
  if (text.empty()) {
    char host[256] = {};
    if (gethostname(host, sizeof host - 1) == 0) text = host;
  }
  core::require_length(text, "SLURMD_NODENAME", 255);
  if (text.empty() || text.find_first_of(" \t\n,[]") != std::string::npos) {
    throw Error(ErrorKind::kInvalidInput,
                "SLURMD_NODENAME " + core::quote_for_error(text) + " is not a node name");
  }
  return text;
}

std::uint32_t job_id() {
  const char* text = std::getenv("SLURM_JOB_ID");
  return static_cast<std::uint32_t>(
      core::parse_unsigned(text ? text : "", "SLURM_JOB_ID", 1, UINT32_MAX - 1));
}

// The node's current reason in slurmctld, or an error text when it cannot be read.
struct NodeReason {
  std::optional<std::string> reason;
  std::string error;
};

NodeReason current_reason(const std::string& node) {
  node_info_msg_t* info = nullptr;
  std::string name = node;  // slurm_load_node_single takes a char*
  if (slurm_load_node_single(&info, name.data(), kShowAll) != SLURM_SUCCESS || info == nullptr) {
    // libslurm leaves its error in errno (slurm_get_errno is gone from Slurm 25.11).
    return {std::nullopt,
            std::string("cannot read the node from slurmctld: ") + slurm_strerror(errno)};
  }
  NodeReason out;
  if (info->record_count == 0) {
    out.error = "slurmctld does not know node " + node;
  } else if (info->node_array[0].reason != nullptr) {
    out.reason = info->node_array[0].reason;
  } else {
    out.reason = std::string();
  }
  slurm_free_node_info_msg(info);
  return out;
}

void drain(const std::string& node, const std::string& reason) {
  update_node_msg_t update;
  slurm_init_update_node_msg(&update);
  std::string names = node;
  std::string text = reason;
  update.node_names = names.data();
  update.node_state = kNodeStateDrain;
  update.reason = text.data();
  if (slurm_update_node(&update) != SLURM_SUCCESS) {
    throw Error(ErrorKind::kResource,
                "slurmctld refused to drain " + node + ": " + slurm_strerror(errno));
  }
}

void check_this_node(const core::PluginConfig& config) {
  const std::string node = node_name();
  const std::uint32_t job = job_id();
  core::FabricLinkFacts facts;
  facts.node = node;
  facts.address = core::resolve_host(node + config.host_suffix);
  facts.interface = core::interface_with_address(facts.address);
  if (facts.interface) {
    const auto state = core::link_state(*facts.interface);
    facts.carrier = state.carrier;
    facts.operstate = state.operstate;
  }
  const core::NodeCheckVerdict verdict = core::judge_fabric_link(facts);
  if (verdict.healthy) {
    if (!verdict.note.empty()) log_info(verdict.note);
    return;
  }
  const std::string reason = core::drain_reason(verdict, job);
  const NodeReason existing = current_reason(node);
  if (!existing.error.empty()) {
    log_error("node check after job " + std::to_string(job) + ": " + verdict.check + ": " +
              verdict.detail + "; not drained: " + existing.error);
    return;
  }
  if (!core::may_set_drain_reason(existing.reason)) {
    log_error("node check after job " + std::to_string(job) + ": " + verdict.check + ": " +
              verdict.detail + "; " + node + " already has the reason '" + *existing.reason +
              "', left as it is");
    return;
  }
  drain(node, reason);
  log_error("node check: drained " + node + ": " + reason);
}

}  // namespace

int run_epilog_node_check(int ac, char** av) noexcept {
  try {
    const auto config =
        core::parse_plugin_args(std::vector<std::string>(av, av + (ac > 0 ? ac : 0)));
    if (config.node_check) check_this_node(config);
  } catch (const std::exception& e) {
    log_error(std::string("node check: ") + e.what() + "; the node is left as it is");
  } catch (...) {
    log_error("node check: unexpected error; the node is left as it is");
  }
  return 0;
}

}  // namespace dtrain::spank
