// SPDX-License-Identifier: Apache-2.0
#pragma once
// Everything the plugin decides for one step on one node, computed once per node:
// layout, node addresses, ports, endpoint list; then per-task environments derived from it.

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/config.hpp"
#include "core/layout.hpp"
#include "core/ports.hpp"

namespace dtrain::core {

struct EnvVar {
  std::string name;
  std::string value;
  bool keep_user_value = false;  // binding variables: a value the user set wins
  // NAME_FILE for a value execve would refuse: `value` is the content, and the exporter puts it
  // in a memory file and exports that file's path instead (core/memory_file_io.hpp).
  bool value_in_memory_file = false;
  bool operator==(const EnvVar&) const = default;
};

// What Slurm tells the plugin about the step, as plain data.
struct StepInputs {
  std::uint32_t job_id = 0;
  std::uint32_t step_id = 0;
  std::uint32_t node_id = 0;  // this node's index in the step (SLURM_NODEID)
  StepSpec spec;
  // This node's global ranks as Slurm placed them; unset offline, where there is no placement
  // to check the layout against.
  std::optional<std::vector<std::uint32_t>> local_ranks;
  std::string reserved_ports;  // SLURM_STEP_RESV_PORTS, empty when none
  // SLURM_NODE_ALIASES of cloud and dynamic nodes: "name:addr:host,..." ("(null)" or empty when
  // none). A node named there is reached at that address instead of resolving its name.
  std::string node_aliases;
};

struct StepPlan {
  StepLayout layout;
  std::uint32_t node = 0;
  std::vector<std::string> node_addresses;  // node index -> address (or name) used in endpoints
  // The address this node probes its own ports on: its entry in node_addresses, or its resolved
  // address where the lists carry names past ip_max_nodes (a name is not probed).
  std::string local_address;
  // address=ip in a step of more than ip_max_nodes nodes: the lists carry node names (SLURM_NODE_
  // ALIASES addresses where Slurm gives them) and only this node's and rank 0's are resolved.
  bool names_past_ip_max_nodes = false;
  StepPorts ports;
  std::string endpoints;       // "addr:port,..." in global-rank order
  std::string endpoints_hash;  // XXH3-64 of `endpoints`, 16 hex digits: DTRAIN_ENDPOINTS_HASH
  std::string master_addr;
  std::string tf_cluster;  // TF_CONFIG's "cluster" object, serialised once per step
  FrameworkSet frameworks;
  std::vector<std::string> step_warnings;  // identical on every node: report once per step
};

// Maps a host name (suffix already applied) to the address used in endpoints. Throws
// dtrain::Error naming the host when it cannot.
using Resolver = std::function<std::string(const std::string& host)>;
// Where a host's address came from, for error messages: the hosts-file line naming it, or "".
using HostsLine = std::function<std::string(const std::string& host)>;

// In a multi-node step with address=ip, a node name that resolves to a loopback address here is
// an error (unless loopback=allow): this node would put 127.x in the endpoint list while every
// other node lists the real address, so the lists would differ. Past config.ip_max_nodes nodes
// only this node's name and rank 0's node's name are resolved (and checked): `resolve` is called
// at most twice instead of once per node.
StepPlan plan_step(const StepInputs& inputs, const PluginConfig& config,
                   const FrameworkSet& frameworks, const Resolver& resolve,
                   const HostsLine& hosts_line = nullptr);

// SLURM_NODE_ALIASES as node name -> address. Throws dtrain::Error naming a malformed entry.
std::map<std::string, std::string> parse_node_aliases(std::string_view text);

// DTRAIN_ENDPOINTS_HASH: XXH3-64 of the endpoint list as 16 lower-case hex digits, so that any
// client can compare lists across ranks cheaply (`xxh64sum`'s XXH3 variant: `xxhsum -H3`).
std::string endpoints_hash(std::string_view endpoints);

// Whether `address` (numeric IPv4 or IPv6) is a loopback address: 127.0.0.0/8 or ::1.
bool is_loopback_address(const std::string& address);

std::string endpoint_of(const StepPlan& plan, std::uint32_t rank);

// Every node of the step runs exactly one task: the shape of a per-node launcher (torchrun),
// which gets PET_* variables.
bool one_task_per_node(const StepPlan& plan);

// The rank-level variables of one task (DTRAIN_*, and the selected frameworks' names).
std::vector<EnvVar> rank_environment(const StepPlan& plan, std::uint32_t global_rank);

// Linux refuses execve when one "NAME=value" string exceeds MAX_ARG_STRLEN (32 pages).
inline constexpr std::size_t kMaxEnvStringBytes = 131072;
inline bool exceeds_exec_limit(const EnvVar& var) {
  return var.name.size() + 1 + var.value.size() + 1 > kMaxEnvStringBytes;
}

}  // namespace dtrain::core
