// SPDX-License-Identifier: Apache-2.0
#pragma once
// The plugin's configuration: plugstack.conf arguments parsed once, unknown keys an error;
// and the value of the user's --distributed-train option.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dtrain::core {

// Which framework families get their variable names exported (DTRAIN_* always are).
struct FrameworkSet {
  bool torch = true;
  bool paddle = true;
  bool tf = true;
  bool jax = true;
  bool operator==(const FrameworkSet&) const = default;
};

inline constexpr std::string_view kValidFrameworks = "torch, paddle, tf (or tensorflow), jax, all";

// "" or "all" -> everything; otherwise a comma-separated list of framework names.
FrameworkSet parse_frameworks(std::string_view text);
std::string to_string(const FrameworkSet& set);

enum class AddressMode { kAddress, kName };

// Which GPUs a task that was given exactly one GPU sees (CUDA_VISIBLE_DEVICES):
//   node: every GPU the step's tasks hold on the node, in local-rank order, so that device
//         LOCAL_RANK is the task's own (PyTorch's `cuda:LOCAL_RANK`, torchrun-style code) and
//         NCCL sees its peers' GPUs (NVLink detection, CUDA IPC: NVIDIA/nccl#1066, #129);
//   task: its own GPU only, as device 0 (per-task isolation);
//   auto: node when the step exports a family that picks its device by index (torch, paddle,
//         jax), task for TensorFlow alone, whose MultiWorkerMirroredStrategy uses every GPU a
//         worker sees.
// A task given several GPUs, or one of several tasks sharing a GPU, always sees its own only.
enum class GpuView { kAuto, kNode, kTask };

inline constexpr std::string_view kValidGpuViews = "auto, node, task";

// "auto", "node" or "task"; `what` names the input in the error.
GpuView parse_gpu_view(std::string_view text, std::string_view what);
std::string to_string(GpuView view);

// Whether the step's tasks get the node view (auto resolved against the exported families).
bool node_gpu_view(GpuView view, const FrameworkSet& frameworks);

inline constexpr std::uint32_t kDefaultIpMaxNodes = 128;

// The default stays below Linux's ephemeral range (32768-60999), where outgoing
// connections would otherwise take the ports a step is about to listen on.
struct PortRange {
  std::uint16_t first = 20000;
  std::uint16_t last = 32767;
  std::uint32_t size() const { return static_cast<std::uint32_t>(last) - first + 1; }
};

// topology=: where a step's node topology comes from.
struct TopologySource {
  enum class Kind {
    kLive,  // discover this machine (through slurmd's cache when there is one); the default
    kNone,  // no topology: no binding
    kFile,  // a site capture (`lstopo --of xml`), the same file on every node
  };
  Kind kind = Kind::kLive;
  std::string path;  // kFile only: absolute
  bool operator==(const TopologySource&) const = default;
};

// topology_cache=: the root-only directory where slurmd writes the live topology once, so that
// steps load a file instead of discovering the machine again; or none.
struct TopologyCache {
  bool enabled = true;
  std::string dir = "/run/dtrain";  // enabled only: absolute
  std::string file() const { return dir + "/topology.xml"; }
  // The same topology as topology/summary.hpp's JSON, which steps read first.
  std::string summary_file() const { return dir + "/topology.summary.json"; }
  bool operator==(const TopologyCache&) const = default;
};

struct PluginConfig {
  bool enabled_by_default = false;  // enable=always makes the option unnecessary
  FrameworkSet frameworks;          // frameworks=: the set used when the option has no value
  PortRange ports;                  // ports=A-B: the range for derived ports
  std::uint32_t port_block = 32;    // port_block=N: ports per step slot in the derived scheme
  AddressMode address_mode = AddressMode::kAddress;  // address=ip|name
  // ip_max_nodes=N: address=ip resolves every node's name only in steps of at most N nodes. In
  // larger steps the endpoint lists carry names and each node resolves only its own name and
  // rank 0's, so that a step costs the site's resolver O(nodes) lookups instead of O(nodes²).
  std::uint32_t ip_max_nodes = kDefaultIpMaxNodes;
  std::string host_suffix;       // suffix=-ib: appended to each host name before resolving
  TopologySource topology;       // topology=/path.xml | live | none
  TopologyCache topology_cache;  // topology_cache=DIR | none
  bool bind = true;              // bind=on|off: GPU/NIC/CPU binding
  // gpus=slurm: only the GPUs in SLURM_STEP_GPUS are the step's (gres on shared nodes); auto:
  // also, where Slurm names no GPUs at all, a user's CUDA_VISIBLE_DEVICES or every GPU.
  bool gpus_from_slurm_only = false;
  GpuView gpu_view = GpuView::kAuto;  // gpu_view=auto|node|task (a step may choose its own)
  // loopback=allow: a multi-node step may list 127.x endpoints (all nodes on one machine).
  bool allow_loopback = false;
  bool check_ports = true;  // check_ports=on|off: warn when a needed port is in use
  // node_check=on|off: in every job's epilog each node checks its own fabric link, as root, and
  // drains itself with a dtrain reason when the link is down (core/node_check.hpp).
  bool node_check = false;
};

inline constexpr std::string_view kPluginKeys =
    "enable, frameworks, ports, port_block, address, ip_max_nodes, suffix, topology, "
    "topology_cache, bind, gpus, gpu_view, loopback, check_ports, node_check";

// Parses plugstack.conf arguments ("key=value" each). Throws dtrain::Error naming the key.
PluginConfig parse_plugin_args(const std::vector<std::string>& args);

}  // namespace dtrain::core
