// SPDX-License-Identifier: Apache-2.0
#include "spank/slurmd_topology_cache.hpp"

#include <fstream>
#include <string>

#include "core/error.hpp"
#include "core/parse.hpp"
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

// A root-only cache file of at most 1 MiB.
std::string read_small_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  const std::streamoff size = in ? static_cast<std::streamoff>(in.tellg()) : -1;
  if (size < 0 || size > static_cast<std::streamoff>(core::kMaxInputBytes)) {
    throw Error(ErrorKind::kInvalidInput, path + " is unreadable or larger than 1 MiB");
  }
  std::string text(static_cast<std::size_t>(size), '\0');
  in.seekg(0);
  if (!in.read(text.data(), size)) throw Error(ErrorKind::kInvalidInput, "cannot read " + path);
  return text;
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

std::optional<topology::NodeTopology> load_trusted_summary(const core::TopologyCache& cache) {
  const std::string summary = trusted_topology_summary(cache);
  if (summary.empty()) return std::nullopt;
  try {
    return topology::from_summary(read_small_file(summary), summary);
  } catch (const Error&) {
    return std::nullopt;
  }
}

}  // namespace dtrain::spank
