#include "core/env_spill.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>

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

std::string make_step_env_dir(const std::string& base, std::uint32_t job_id,
                              std::uint32_t step_id) {
  const std::string dir = base + "/dtrain-" + std::to_string(geteuid()) + "-" +
                          std::to_string(job_id) + "." + std::to_string(step_id);
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

std::vector<std::string> spill_oversized(std::vector<std::vector<EnvVar>>& tasks,
                                         const std::vector<std::uint32_t>& ranks,
                                         const std::string& dir) {
  std::vector<std::string> spilled;
  std::map<std::string, std::string> written;  // name -> value already in "<dir>/<name>"
  for (std::size_t t = 0; t < tasks.size(); ++t) {
    for (auto& var : tasks[t]) {
      if (!exceeds_exec_limit(var)) continue;
      std::string path = dir + "/" + var.name;
      const auto it = written.find(var.name);
      if (it == written.end()) {
        write_file(path, var.value);
        written.emplace(var.name, var.value);
      } else if (it->second != var.value) {
        path += '.';
        path += std::to_string(ranks.at(t));
        write_file(path, var.value);
      }
      if (std::find(spilled.begin(), spilled.end(), var.name) == spilled.end()) {
        spilled.push_back(var.name);
      }
      var.name += "_FILE";
      var.value = std::move(path);
    }
  }
  return spilled;
}

}  // namespace dtrain::core
