// SPDX-License-Identifier: Apache-2.0
#pragma once
// How close two PCI devices are, with the classes of `nvidia-smi topo -m` and NCCL's path
// types (best first):
//   PIX  through at most one PCIe switch (they share a switch or a bridge),
//   PXB  through several switches, without crossing a host bridge,
//   PHB  through their common PCIe host bridge,
//   NODE across host bridges inside one NUMA node,
//   SYS  across NUMA nodes or sockets.

#include "topology/node_topology.hpp"

namespace dtrain::topology {

enum class Closeness { kPix, kPxb, kPhb, kNode, kSys };

const char* closeness_name(Closeness closeness) noexcept;

// Walks both parent chains itself: hwloc_get_common_ancestor_obj() is unsafe on I/O objects
// (open-mpi/ompi#14458).
Closeness classify(const Placement& a, const Placement& b);

}  // namespace dtrain::topology
