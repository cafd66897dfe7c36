// SPDX-License-Identifier: Apache-2.0
#include "topology/allowed_cpus.hpp"

#include "topology/affinity_io.hpp"

namespace dtrain::topology {
namespace {

void cut(CpuList& cpus, const CpuList& allowed) {
  cpus = intersect_cpus(cpus, allowed);
}

void cut(Placement& placement, const CpuList& allowed) {
  cut(placement.locality.cpus, allowed);
}

}  // namespace

NodeTopology restrict_to_cpus(const NodeTopology& topology, const CpuList& allowed) {
  NodeTopology out = topology;
  out.cores.clear();
  for (const CpuList& core : topology.cores) {
    CpuList kept = intersect_cpus(core, allowed);
    if (!kept.empty()) out.cores.push_back(std::move(kept));
  }
  if (out.cores.empty()) return topology;
  for (NumaNode& node : out.numa_nodes) cut(node.cpus, allowed);
  for (Gpu& gpu : out.gpus) cut(gpu.placement, allowed);
  for (Nic& nic : out.nics) cut(nic.placement, allowed);
  return out;
}

}  // namespace dtrain::topology
