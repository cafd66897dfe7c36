#include "core/memory_file_io.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.hpp"

namespace dtrain::core {
namespace {

[[noreturn]] void fail(const std::string& what, std::string_view name) {
  throw Error(ErrorKind::kResource,
              what + " for " + std::string(name) + ": " + std::strerror(errno));
}

// The lowest descriptor to move the file to: well above what shells and launchers redirect
// (bash's own start at 10), below the soft limit.
int high_descriptor_floor() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return 512;
  return limit.rlim_cur > 1024 ? 512 : static_cast<int>(limit.rlim_cur / 2);
}

}  // namespace

std::string export_memory_file(std::string_view name, std::string_view content) {
  const std::string label = "dtrain:" + std::string(name);
  const int fd = memfd_create(label.c_str(), MFD_ALLOW_SEALING);
  if (fd < 0) fail("cannot create a memory file", name);
  std::size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      close(fd);
      fail("cannot write the memory file", name);
    }
    done += static_cast<std::size_t>(n);
  }
  // memfd_create makes the inode 0777. /proc/<pid>/fd already keeps other users out, but the
  // file itself should say it belongs to its owner alone, as a spill file on disk would.
  if (fchmod(fd, S_IRUSR) != 0) {
    close(fd);
    fail("cannot make the memory file private", name);
  }
  if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) != 0 ||
      lseek(fd, 0, SEEK_SET) != 0) {
    close(fd);
    fail("cannot seal the memory file", name);
  }
  int kept = fcntl(fd, F_DUPFD, high_descriptor_floor());
  if (kept < 0) kept = fd;  // no high descriptor free: the low one still works
  if (kept != fd) close(fd);
  return "/proc/" + std::to_string(getpid()) + "/fd/" + std::to_string(kept);
}

std::string MemoryFileExporter::path_for(std::string_view name, std::string_view content) {
  for (const auto& previous : exported_) {
    if (previous.content == content) return previous.path;
  }
  exported_.push_back({content, export_memory_file(name, content)});
  return exported_.back().path;
}

}  // namespace dtrain::core
