// SPDX-License-Identifier: Apache-2.0
#include "core/memory_file_io.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "core/error.hpp"

namespace dtrain::core {
namespace {

constexpr unsigned kSeals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL;
// No value the plugin writes comes near this: a larger file is not one of its memory files.
constexpr off_t kMaxContentBytes = off_t{1} << 30;

[[noreturn]] void fail(const std::string& what, const std::string& label, int error) {
  throw Error(ErrorKind::kResource, what + " " + label + ": " + std::strerror(error));
}

// The lowest descriptor to move the file to: well above what shells and launchers redirect
// (bash's own start at 10), below the soft limit.
int high_descriptor_floor() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return 512;
  return limit.rlim_cur > 1024 ? 512 : static_cast<int>(limit.rlim_cur / 2);
}

class Descriptor {
 public:
  explicit Descriptor(int fd) : fd_(fd) {}
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  ~Descriptor() {
    if (fd_ >= 0) close(fd_);
  }
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

// What `place` leads to, or the error of reaching it.
std::string look_at(const std::string& place, MemoryFileSeen& seen) {
  Descriptor fd(open(place.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (fd.get() < 0) return place + ": " + std::strerror(errno);
  char target[512];
  const std::string own = "/proc/self/fd/" + std::to_string(fd.get());
  const ssize_t length = readlink(own.c_str(), target, sizeof target - 1);
  if (length < 0) return own + ": " + std::strerror(errno);
  seen.link_target.assign(target, static_cast<std::size_t>(length));
  const int seals = fcntl(fd.get(), F_GET_SEALS);
  seen.sealed = seals >= 0 && (static_cast<unsigned>(seals) & kSeals) == kSeals;
  struct stat st {};
  if (fstat(fd.get(), &st) != 0) return place + ": " + std::strerror(errno);
  // Only a sealed regular file of a plausible size is read: a pipe or a device at that number
  // would block or never end (memory_file_mismatch refuses those by their label anyway).
  seen.sealed = seen.sealed && S_ISREG(st.st_mode) && st.st_size <= kMaxContentBytes;
  if (!seen.sealed) return {};
  seen.content.resize(static_cast<std::size_t>(st.st_size));
  std::size_t done = 0;
  while (done < seen.content.size()) {
    const ssize_t n = pread(fd.get(), seen.content.data() + done, seen.content.size() - done,
                            static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return place + ": " + std::strerror(errno);
    if (n == 0) break;
    done += static_cast<std::size_t>(n);
  }
  seen.content.resize(done);
  return {};
}

}  // namespace

int create_memory_file(const std::string& label, std::string_view content) {
  Descriptor fd(memfd_create(label.c_str(), MFD_ALLOW_SEALING));
  if (fd.get() < 0) fail("cannot create the memory file", label, errno);
  std::size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = write(fd.get(), content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail("cannot write the memory file", label, n < 0 ? errno : EIO);
    done += static_cast<std::size_t>(n);
  }
  // memfd_create makes the inode 0777. /proc/<pid>/fd already keeps other users out, but the
  // file itself should say it belongs to its owner alone, as a spill file on disk would.
  if (fchmod(fd.get(), S_IRUSR) != 0) fail("cannot make private the memory file", label, errno);
  if (fcntl(fd.get(), F_ADD_SEALS, kSeals) != 0 || lseek(fd.get(), 0, SEEK_SET) != 0) {
    fail("cannot seal the memory file", label, errno);
  }
  const int kept = fcntl(fd.get(), F_DUPFD, high_descriptor_floor());
  if (kept < 0) return fd.release();  // no high descriptor free: the low one still works
  return kept;                        // `fd` closes the low one
}

std::vector<std::string> export_memory_files(const MemoryFileOwner& owner,
                                             const std::vector<EnvVar>& vars) {
  std::vector<std::string> paths(vars.size());
  // Files by their first variable's index; each lists the variables that share it.
  std::vector<std::pair<std::size_t, std::vector<std::size_t>>> files;
  for (std::size_t i = 0; i < vars.size(); ++i) {
    if (!vars[i].value_in_memory_file) continue;
    bool shared = false;
    for (auto& [first, members] : files) {
      if (vars[first].value == vars[i].value) {
        members.push_back(i);
        shared = true;
        break;
      }
    }
    if (!shared) files.push_back({i, {i}});
  }
  std::vector<int> made;
  try {
    for (const auto& [first, members] : files) {
      std::vector<std::string> names;
      for (const auto i : members) {
        const auto& name = vars[i].name;  // NAME_FILE: the label names NAME
        names.push_back(name.ends_with("_FILE") ? name.substr(0, name.size() - 5) : name);
      }
      const int fd = create_memory_file(memory_file_label(owner, names), vars[first].value);
      made.push_back(fd);
      for (const auto i : members) paths[i] = memory_file_path(fd);
    }
  } catch (...) {
    for (const int fd : made) close(fd);
    throw;
  }
  return paths;
}

std::optional<std::string> read_memory_file(const std::string& name, const EnvLookup& lookup) {
  const auto expected = memory_file_expectation(name, lookup);
  if (!expected) return std::nullopt;
  std::string problems;
  for (const auto& place : memory_file_places(*expected, static_cast<std::uint32_t>(getpid()))) {
    MemoryFileSeen seen;
    auto problem = look_at(place, seen);
    if (problem.empty()) problem = memory_file_mismatch(*expected, place, seen);
    if (problem.empty()) return std::move(seen.content);
    problems += (problems.empty() ? "" : "; ") + problem;
  }
  throw Error(ErrorKind::kMismatch,
              "cannot read " + name + " from its memory file: " + problems +
                  ". The file lives as long as the step's task and is inherited by the processes "
                  "it starts; read it in the task or in a child that kept its descriptors");
}

}  // namespace dtrain::core
