// SPDX-License-Identifier: Apache-2.0
#include "spank/slurmd_topology_cache.hpp"

#include <string>

#include "core/error.hpp"
#include "spank/root_files.hpp"
#include "topology/load_io.hpp"
#include "topology/summary.hpp"

namespace dtrain::spank {
namespace {

// `file` of the cache when it and its directory are root's alone; empty otherwise.
std::string trusted_cache_file(const core::TopologyCache& cache, const std::string& file) {
  if (!cache.enabled || !root_only(cache.dir, true) || !root_only(file, false)) return {};
  return file;
}

}  // namespace

void write_topology_cache(const core::PluginConfig& config) {
  const bool steps_bind_live =
      config.bind && config.topology.kind == core::TopologySource::Kind::kLive;
  if (!steps_bind_live || !config.topology_cache.enabled) return;
  const std::string& dir = config.topology_cache.dir;
  try {
    make_root_dir(dir, 0755);
  } catch (const Error& e) {
    // The cache is written by root and read by every user's step.
    throw Error(ErrorKind::kResource, std::string("topology_cache: ") + e.what() +
                                          "; steps will discover the topology themselves");
  }
  topology::export_live_topology(config.topology_cache.file());
  // The XML just written loads in a fraction of a discovery; its summary loads in a fraction of
  // that, for every step.
  write_root_file(config.topology_cache.summary_file(),
                  topology::to_summary(topology::load_topology(config.topology_cache.file())));
}

std::string trusted_topology_cache(const core::TopologyCache& cache) {
  return trusted_cache_file(cache, cache.file());
}

std::string trusted_topology_summary(const core::TopologyCache& cache) {
  return trusted_cache_file(cache, cache.summary_file());
}

}  // namespace dtrain::spank
