// SPDX-License-Identifier: Apache-2.0
#pragma once
// The part of a node's topology that a confined step may use. On a shared node (task/cgroup,
// or jobs that hold only some cores) the step's cpuset is smaller than the machine: shares must
// be cut from the step's own CPUs, or a task's planned CPUs lie outside its cpuset and tasks
// overlap. Pure: plain data in and out; the binding policy stays unaware of cpusets.

#include "topology/cpu_list.hpp"
#include "topology/node_topology.hpp"

namespace dtrain::topology {

// `topology` cut to `allowed`: every core keeps its allowed PUs (cores without any are dropped),
// every NUMA domain and device locality keeps its allowed CPUs. When `allowed` shares no CPU
// with the topology (a site XML of another machine), the topology is returned unchanged.
NodeTopology restrict_to_cpus(const NodeTopology& topology, const CpuList& allowed);

}  // namespace dtrain::topology
