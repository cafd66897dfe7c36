// SPDX-License-Identifier: Apache-2.0
#pragma once
// One node's CPUs, GPUs and NICs as plain data: what the binding policy needs and nothing
// hwloc-specific. load_topology() fills it from hwloc; tests may also write it by hand.

#include <cstdint>
#include <string>
#include <vector>

#include "topology/cpu_list.hpp"

namespace dtrain::topology {

// One object on a device's way up the PCI tree.
struct IoHop {
  enum class Kind { kPciBridge, kHostBridge };
  Kind kind = Kind::kPciBridge;
  std::uint64_t id = 0;  // unique within the topology (hwloc's gp_index)
  bool operator==(const IoHop&) const = default;
};

// The CPU-side object a device hangs from (its first non-I/O ancestor, usually the NUMA
// domain's package or group).
struct Locality {
  std::uint64_t id = 0;              // unique within the topology
  int package = -1;                  // os index of the enclosing package, -1 when unknown
  std::vector<unsigned> numa_nodes;  // NUMA node os indexes, ascending
  CpuList cpus;                      // its PUs
  bool operator==(const Locality&) const = default;
};

// Where a PCI device sits: its I/O ancestors, nearest first, then its locality.
struct Placement {
  std::vector<IoHop> io_path;  // from the device's parent up to (and including) its host bridge
  Locality locality;
  bool operator==(const Placement&) const = default;
};

struct Gpu {
  std::string bus_id;     // canonical, e.g. 0000:1b:00.0
  std::string cuda_name;  // "cuda3" when hwloc's CUDA backend saw it, else empty
  std::string nvml_name;  // "nvml3" likewise
  std::string model;
  Placement placement;
  bool operator==(const Gpu&) const = default;
};

// One PCI function used for networking. An HCA and the netdev on the same function are one Nic.
struct Nic {
  std::string bus_id;
  std::string hca;     // OpenFabrics device (mlx5_0, rdmap16s27); empty for a plain netdev
  std::string netdev;  // network interface (ib0, ibp24s0, eth0); empty when none (EFA)
  unsigned port = 0;   // HCA port to use (first active one), 0 when unknown
  Placement placement;
  bool operator==(const Nic&) const = default;
};

struct NumaNode {
  unsigned os_index = 0;
  CpuList cpus;
  bool operator==(const NumaNode&) const = default;
};

struct NodeTopology {
  std::string source;          // the XML path, or "this machine"
  bool has_io = false;         // hwloc reported PCI devices; false means GPUs and NICs are unknown
  std::vector<CpuList> cores;  // PUs of each core, in topology order
  std::vector<NumaNode> numa_nodes;  // ascending os index
  std::vector<Gpu> gpus;             // ascending PCI bus id
  std::vector<Nic> nics;             // ascending PCI bus id
  bool operator==(const NodeTopology&) const = default;
};

}  // namespace dtrain::topology
