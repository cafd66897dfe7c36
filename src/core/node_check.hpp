// SPDX-License-Identifier: Apache-2.0
#pragma once
// The node check a job's epilog runs as root on each of its nodes (node_check=on): whether this
// node's own data-fabric link is usable, and what to tell slurmctld when it is not. Pure: facts
// read by spank/slurmd_epilog_node_check.cpp in, a verdict out.
//
// Only the node's own evidence drains it: the interface that holds the node's fabric address
// (its name plus suffix=, resolved on the node) has no carrier or is down. Nothing a job writes
// or exits with is read, so a job cannot drain a node; and a node whose fabric address is held
// by no interface (a configuration problem shared by every node, not a fault of this one) is
// only logged, so that a wrong suffix= never drains a cluster.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace dtrain::core {

struct FabricLinkFacts {
  std::string node;     // SLURMD_NODENAME
  std::string address;  // the node's fabric address, as resolved on the node
  // The interface holding `address`; unset when none does.
  std::optional<std::string> interface;
  std::optional<int> carrier;  // /sys/class/net/IF/carrier: 1, 0, or unset when unreadable
  std::string operstate;       // /sys/class/net/IF/operstate: up, down, lowerlayerdown, unknown...
};

struct NodeCheckVerdict {
  bool healthy = true;
  std::string check;   // the failed check's name ("fabric"), when not healthy
  std::string detail;  // what it saw: "fab0 (198.19.0.12) has no carrier, operstate down"
  std::string note;    // for slurmd's log when healthy but something is worth saying
};

NodeCheckVerdict judge_fabric_link(const FabricLinkFacts& facts);

// The deeper check, run only on a node that a fault hint of the job names (core/fault_hint.hpp):
// whether this node reaches the fabric addresses of the job's other nodes (ICMP echo).
struct PeerProbe {
  std::string node;
  std::string address;  // empty when the peer's fabric name did not resolve here
  bool reachable = false;
};

struct FabricReachFacts {
  std::string interface;  // where the node's own fabric address is, for the message
  std::string address;
  std::vector<PeerProbe> peers;  // at most kMaxReachPeers of the job's other nodes
  int budget_ms = 0;
};

// Peers probed per hinted node: enough to tell "this node reaches nobody" from one dead peer,
// few enough that the check stays a fraction of a second whatever the job's size.
inline constexpr std::size_t kMaxReachPeers = 8;

// The job's other nodes that the deeper check probes: the kMaxReachPeers that follow `self` in
// the job's node list, wrapping around (so that the hinted nodes of one job probe different
// peers). Empty when `self` is the job's only node.
std::vector<std::string> reach_peers(const std::vector<std::string>& job_nodes,
                                     const std::string& self);

// Unhealthy ("fabric-reach") only when at least one peer resolved and none of them answered:
// this node cannot use the fabric although its link is up. One peer reached is enough to call
// the node healthy, since a dead peer is that peer's fault. Called only for a node a hint names,
// so a fabric that is down everywhere drains at most the nodes the job's own verdict singled
// out, never every node it ran on.
NodeCheckVerdict judge_fabric_reach(const FabricReachFacts& facts);

// The GPU check, on every node where slurmd's own discovery recorded GPUs (the topology cache of
// a live topology): each of those GPUs must still answer on the PCI bus. A GPU that is gone from
// sysfs, or whose configuration space reads 0xffff, has "fallen off the bus" (NVIDIA's Xid 79):
// every job that lands on the node fails until it is rebooted or repaired.
struct GpuPresence {
  std::string bus_id;
  std::optional<std::uint16_t> vendor;  // configuration space now; unset: gone from sysfs
};
NodeCheckVerdict judge_gpus(const std::vector<GpuPresence>& gpus);

// slurmctld's Reason for the drain: "dtrain: fabric: <detail> (job J)", cut to what
// `scontrol show node` shows in full.
std::string drain_reason(const NodeCheckVerdict& verdict, std::uint32_t job_id);

// dtrain sets a reason only where none is set: an administrator's or another tool's stays.
// Reasons that dtrain set start with this prefix, which is how a site finds (and resumes) them.
inline constexpr const char* kDrainReasonPrefix = "dtrain: ";
bool may_set_drain_reason(const std::optional<std::string>& existing_reason);

}  // namespace dtrain::core
