#include "core/env_spill_io.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.hpp"

namespace dtrain::core {
namespace {

[[noreturn]] void fail(const std::string& what, const std::string& path) {
  throw Error(ErrorKind::kResource, what + " '" + path + "': " + std::strerror(errno));
}

void write_file(const std::string& path, const std::string& value) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) fail("cannot create", path);
  std::size_t done = 0;
  while (done < value.size()) {
    const ssize_t n = write(fd, value.data() + done, value.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      close(fd);
      fail("cannot write", path);
    }
    done += static_cast<std::size_t>(n);
  }
  if (close(fd) != 0) fail("cannot write", path);
}

}  // namespace

std::string step_spill_dir(const std::string& base, std::uint32_t uid, std::uint32_t job_id,
                           std::uint32_t step_id) {
  return base + "/dtrain-" + std::to_string(uid) + "-" + std::to_string(job_id) + "." +
         std::to_string(step_id);
}

std::string make_step_env_dir(const std::string& base, std::uint32_t job_id,
                              std::uint32_t step_id) {
  const std::string dir = step_spill_dir(base, geteuid(), job_id, step_id);
  if (mkdir(dir.c_str(), 0700) != 0) {
    if (errno != EEXIST) fail("cannot create the step directory", dir);
    struct stat st {};
    if (lstat(dir.c_str(), &st) != 0) fail("cannot inspect", dir);
    if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077) != 0) {
      errno = EPERM;
      fail("refusing to use the step directory (not a private directory of this user)", dir);
    }
  }
  return dir;
}

void write_spill_files(const std::vector<SpillFile>& files) {
  for (const auto& file : files) write_file(file.path, file.value);
}

}  // namespace dtrain::core
