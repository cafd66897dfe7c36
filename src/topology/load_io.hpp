// SPDX-License-Identifier: Apache-2.0
#pragma once
// hwloc adapter: discovers a node's topology once and returns it as plain data.

#include <string>

#include "topology/node_topology.hpp"

namespace dtrain::topology {

// Loads the topology from a hwloc XML file (a site-provided capture), or from this machine
// when `xml_path` is empty. I/O objects are kept (HWLOC_TYPE_FILTER_KEEP_IMPORTANT, which
// also applies to XML import). GPUs are NVIDIA PCI devices of class 0x03xx or devices with a
// cuda*/nvml* OS device; NICs are PCI functions with an OpenFabrics or network OS device.
// A file is read once and screened by find_xml_hazard (xml_guard.hpp) before hwloc parses
// it. Throws Error(kResource) naming the path when the file is missing or not a regular
// file, when the screen refuses it (naming the line and the reason) or when hwloc rejects it.
NodeTopology load_topology(const std::string& xml_path);

// Discovers this machine (as load_topology("") does) and writes it as hwloc XML to `xml_path`,
// atomically. Loading that file later costs a fraction of a live discovery. Throws
// Error(kResource) naming the path.
void export_live_topology(const std::string& xml_path);

}  // namespace dtrain::topology
