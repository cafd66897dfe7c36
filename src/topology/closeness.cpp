// SPDX-License-Identifier: Apache-2.0
#include "topology/closeness.hpp"

#include <algorithm>

namespace dtrain::topology {

const char* closeness_name(Closeness closeness) noexcept {
  switch (closeness) {
    case Closeness::kPix:
      return "PIX";
    case Closeness::kPxb:
      return "PXB";
    case Closeness::kPhb:
      return "PHB";
    case Closeness::kNode:
      return "NODE";
    case Closeness::kSys:
      return "SYS";
  }
  return "?";
}

Closeness classify(const Placement& a, const Placement& b) {
  for (std::size_t i = 0; i < a.io_path.size(); ++i) {
    for (std::size_t j = 0; j < b.io_path.size(); ++j) {
      if (a.io_path[i].id != b.io_path[j].id) continue;
      if (a.io_path[i].kind == IoHop::Kind::kHostBridge) return Closeness::kPhb;
      // hwloc shows a PCIe switch as an upstream bridge over downstream bridges, so two
      // devices behind one switch have at most one bridge each below the common one; more
      // means a second switch on the way (NCCL merges each switch into one PCI node the same way).
      return std::max(i, j) <= 1 ? Closeness::kPix : Closeness::kPxb;
    }
  }
  const Locality& la = a.locality;
  const Locality& lb = b.locality;
  const bool same_numa =
      la.id == lb.id || (!la.numa_nodes.empty() && la.numa_nodes == lb.numa_nodes);
  return same_numa ? Closeness::kNode : Closeness::kSys;
}

}  // namespace dtrain::topology
