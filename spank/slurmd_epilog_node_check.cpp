// SPDX-License-Identifier: Apache-2.0
#include "spank/slurmd_epilog_node_check.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <ctime>
#include <optional>
#include <string>
#include <vector>

#include "core/config.hpp"
#include "core/error.hpp"
#include "core/fault_hint.hpp"
#include "core/hostlist.hpp"
#include "core/net_io.hpp"
#include "core/node_check.hpp"
#include "core/parse.hpp"
#include "core/reachability_io.hpp"
#include "spank/root_files.hpp"
#include "spank/slurmctld_job.hpp"
#include "spank/slurmd_topology_cache.hpp"
#include "spank/spank_io.hpp"
#include "topology/pci_io.hpp"

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

// The hints slurmstepd kept for this job on this host (spank/slurmstepd_root_fault_hint.cpp),
// each file removed once read. Only root-owned regular files in the root-only directory count;
// files of this host older than a day (a job whose epilog never ran) are removed on the way.
std::vector<core::FaultHint> take_fault_hints(const core::PluginConfig& config, std::uint32_t job,
                                              const std::string& host) {
  std::vector<core::FaultHint> hints;
  const std::string dir = core::fault_hint_dir(config.topology_cache);
  if (!root_only(dir, true)) return hints;
  DIR* listing = opendir(dir.c_str());
  if (listing == nullptr) return hints;
  const std::string stale_suffix = "." + host;
  const time_t day_ago = time(nullptr) - 24 * 3600;
  while (const dirent* entry = readdir(listing)) {
    const std::string name = entry->d_name;
    const std::string path = dir + "/" + name;
    if (!core::is_fault_hint_file_of(name, job, host)) {
      struct stat st {};
      if (name.ends_with(stale_suffix) && lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
          st.st_mtime < day_ago) {
        unlink(path.c_str());
      }
      continue;
    }
    constexpr std::size_t kMaxFileBytes = 8192;
    const int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    struct stat st {};
    if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == 0 &&
        static_cast<std::size_t>(st.st_size) <= kMaxFileBytes) {
      std::string bytes(static_cast<std::size_t>(st.st_size), '\0');
      const ssize_t n = read(fd, bytes.data(), bytes.size());
      bytes.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
      for (auto& hint : core::parse_fault_hints(bytes).hints) hints.push_back(std::move(hint));
    }
    if (fd >= 0) close(fd);
    unlink(path.c_str());
  }
  closedir(listing);
  return hints;
}

// The job's nodes: slurmd's SLURM_JOB_NODELIST where the epilog has it (Slurm's epilog scripts
// do, prep_script_slurmd.c; SPANK's job_epilog of 22.05 does not), else slurmctld's record.
std::string job_nodes(std::uint32_t job) {
  for (const char* name : {"SLURM_JOB_NODELIST", "SLURM_NODELIST"}) {
    if (const char* value = std::getenv(name); value != nullptr && *value != '\0') return value;
  }
  const JobInfo info = load_job_info(job);
  const slurm_job_info_t* record = find_job(info, job);
  if (record == nullptr || record->nodes == nullptr) {
    throw Error(ErrorKind::kResource, "cannot read job " + std::to_string(job) +
                                          "'s nodes from slurmctld: " + slurm_strerror(errno));
  }
  return record->nodes;
}

// The deeper check of a node that a hint names: ICMP echo to the fabric addresses of up to
// core::kMaxReachPeers of the job's other nodes, 1.5 s at most in all (EpilogTimeout is often a
// minute or more; the default has none).
core::NodeCheckVerdict check_fabric_reach(const core::PluginConfig& config,
                                          const core::FabricLinkFacts& link,
                                          std::uint32_t link_job) {
  constexpr int kBudgetMs = 1500;
  core::FabricReachFacts facts;
  facts.interface = link.interface.value_or("?");
  facts.address = link.address;
  facts.budget_ms = kBudgetMs;
  const auto nodes = core::expand_hostlist(job_nodes(link_job), 1U << 20);
  std::vector<std::string> addresses;
  for (const auto& peer : core::reach_peers(nodes, link.node)) {
    core::PeerProbe probe;
    probe.node = peer;
    try {
      probe.address = core::resolve_host(peer + config.host_suffix);
      addresses.push_back(probe.address);
    } catch (const Error&) {
      // Left empty: a peer this node cannot name is not evidence against this node.
    }
    facts.peers.push_back(std::move(probe));
  }
  const auto outcomes = core::probe_echo(addresses, std::chrono::milliseconds(kBudgetMs));
  std::size_t next = 0;
  for (auto& peer : facts.peers) {
    if (!peer.address.empty() && next < outcomes.size())
      peer.reachable = outcomes[next++].reachable;
  }
  return core::judge_fabric_reach(facts);
}

// The GPUs slurmd's own discovery found when it started (its topology cache, only for a live
// topology: a site's topology= file describes other machines' bus ids), each read on the PCI bus
// now. No cache, or no GPU in it: nothing to check.
core::NodeCheckVerdict check_gpus(const core::PluginConfig& config) {
  if (config.topology.kind != core::TopologySource::Kind::kLive) return {};
  const auto recorded = load_trusted_summary(config.topology_cache);
  if (!recorded) return {};
  std::vector<core::GpuPresence> gpus;
  for (const auto& gpu : recorded->gpus) {
    try {
      gpus.push_back({gpu.bus_id, topology::pci_config_vendor(gpu.bus_id)});
    } catch (const Error& e) {
      // No evidence either way: left out of the count, and said.
      log_info("node check: GPU " + gpu.bus_id + " not checked: " + e.what());
    }
  }
  return core::judge_gpus(gpus);
}

// Drains `node` for `verdict`, unless slurmctld cannot say or the node already has a reason.
void drain_for(const std::string& node, std::uint32_t job, const core::NodeCheckVerdict& verdict) {
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

std::string describe(const core::FaultHint& hint) {
  return "suspect " + hint.node + (hint.detail.empty() ? "" : ": " + hint.detail);
}

void check_this_node(const core::PluginConfig& config) {
  const std::string node = node_name();
  const std::uint32_t job = job_id();
  const std::string host = core::local_host_name();
  core::FabricLinkFacts facts;
  facts.node = node;
  facts.address = core::resolve_host(node + config.host_suffix);
  facts.interface = core::interface_with_address(facts.address);
  if (facts.interface) {
    const auto state = core::link_state(*facts.interface);
    facts.carrier = state.carrier;
    facts.operstate = state.operstate;
  }
  core::NodeCheckVerdict verdict = core::judge_fabric_link(facts);
  if (verdict.healthy) {
    const core::NodeCheckVerdict gpus = check_gpus(config);
    if (!gpus.healthy) verdict = gpus;
  }

  // What the job said: only a hint naming this node counts, and only to choose the deeper check.
  const std::string of_job = "job " + std::to_string(job) + "'s fault hint (";
  std::optional<core::FaultHint> own_hint;
  for (const auto& hint : take_fault_hints(config, job, host)) {
    if (hint.node == node || hint.node == host) {
      if (!own_hint) own_hint = hint;
    } else {
      log_error("node check: " + of_job + describe(hint) + "), written on " + node +
                ", names another node; ignored");
    }
  }
  if (!own_hint) {
    if (!verdict.healthy) {
      drain_for(node, job, verdict);
    } else if (!verdict.note.empty()) {
      log_info(verdict.note);
    }
    return;
  }
  const std::string hint_text = of_job + describe(*own_hint) + ")";
  if (verdict.healthy && facts.interface) {
    const std::string link_up = *facts.interface + " is up";
    verdict = check_fabric_reach(config, facts, job);
    if (verdict.healthy) {
      log_error("node check: " + hint_text + " did not reproduce: " + link_up + "; " +
                verdict.note + "; " + node + " not drained");
      return;
    }
  } else if (verdict.healthy) {
    log_error("node check: " + hint_text + " not checked further: " + verdict.note + "; " + node +
              " not drained");
    return;
  }
  log_error("node check: " + hint_text + " confirmed: " + verdict.check + ": " + verdict.detail);
  drain_for(node, job, verdict);
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
