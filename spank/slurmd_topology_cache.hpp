// SPDX-License-Identifier: Apache-2.0
#pragma once
// The topology cache. slurmd writes it as root, once at start (write_topology_cache), so that
// steps load a file instead of discovering the machine again. slurmstepd reads it as the
// user, and only while root alone can write it (trusted_topology_cache).

#include <optional>
#include <string>

#include "core/config.hpp"
#include "topology/node_topology.hpp"

namespace dtrain::spank {

// In slurmd, as root. Does nothing unless steps bind from the live topology. Throws
// dtrain::Error when the directory cannot be made root-only or the file cannot be written.
void write_topology_cache(const core::PluginConfig& config);

// In slurmstepd: the cache file when it and its directory are root's and writable by no one
// else; empty otherwise (the step then discovers the machine itself).
std::string trusted_topology_cache(const core::TopologyCache& cache);
// The same for the summary (topology/summary.hpp), which a step reads before the XML.
std::string trusted_topology_summary(const core::TopologyCache& cache);
// The trusted summary, loaded; nothing when there is none or it is damaged (a lost shortcut).
std::optional<topology::NodeTopology> load_trusted_summary(const core::TopologyCache& cache);

}  // namespace dtrain::spank
