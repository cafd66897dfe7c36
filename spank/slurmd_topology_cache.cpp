// SPDX-License-Identifier: Apache-2.0
#include "spank/slurmd_topology_cache.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.hpp"
#include "topology/load_io.hpp"
#include "topology/summary.hpp"

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

// Writes `content` to `path` in a root-only directory: a new file beside it, then rename(2), so
// a step never reads half a file.
void write_root_file(const std::string& path, const std::string& content) {
  const std::string partial = path + ".partial." + std::to_string(getpid());
  const int fd = open(partial.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) {
    throw Error(ErrorKind::kResource, "cannot create " + partial + ": " + std::strerror(errno));
  }
  std::size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<std::size_t>(n);
  }
  const int saved_errno = errno;
  if (close(fd) != 0 || done != content.size() || rename(partial.c_str(), path.c_str()) != 0) {
    const int error = done != content.size() ? saved_errno : errno;
    unlink(partial.c_str());
    throw Error(ErrorKind::kResource, "cannot write " + path + ": " + std::strerror(error));
  }
}

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
