#include "spank/slurmd_topology_cache.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "core/error.hpp"
#include "topology/load_io.hpp"

namespace dtrain::spank {
namespace {

// The cache is written by root and read by every user's step, so it must be a root-owned
// path nobody else can write.
bool root_only(const std::string& path, bool want_directory) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) return false;
  const bool right_type = want_directory ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode);
  return right_type && st.st_uid == 0 && (st.st_mode & (S_IWGRP | S_IWOTH)) == 0;
}

}  // namespace

void write_topology_cache(const core::PluginConfig& config) {
  const bool steps_bind_live =
      config.bind && config.topology.kind == core::TopologySource::Kind::kLive;
  if (!steps_bind_live || !config.topology_cache.enabled) return;
  const std::string& dir = config.topology_cache.dir;
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    throw Error(ErrorKind::kResource,
                "cannot create topology_cache directory '" + dir + "': " + std::strerror(errno));
  }
  if (!root_only(dir, true)) {
    throw Error(ErrorKind::kResource, "topology_cache directory '" + dir +
                                          "' is not a directory that only root can write; "
                                          "steps will discover the topology themselves");
  }
  topology::export_live_topology(config.topology_cache.file());
}

std::string trusted_topology_cache(const core::TopologyCache& cache) {
  if (!cache.enabled || !root_only(cache.dir, true) || !root_only(cache.file(), false)) return {};
  return cache.file();
}

}  // namespace dtrain::spank
