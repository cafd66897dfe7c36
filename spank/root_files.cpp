// SPDX-License-Identifier: Apache-2.0
#include "spank/root_files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.hpp"

namespace dtrain::spank {

bool root_only(const std::string& path, bool want_directory) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) return false;
  const bool right_type = want_directory ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode);
  return right_type && st.st_uid == 0 && (st.st_mode & (S_IWGRP | S_IWOTH)) == 0;
}

void make_root_dir(const std::string& dir, unsigned mode) {
  if (mkdir(dir.c_str(), static_cast<mode_t>(mode)) != 0 && errno != EEXIST) {
    throw Error(ErrorKind::kResource,
                "cannot create directory '" + dir + "': " + std::strerror(errno));
  }
  if (!root_only(dir, true)) {
    throw Error(ErrorKind::kResource, "'" + dir + "' is not a directory that only root can write");
  }
}

void write_root_file(const std::string& path, const std::string& content, unsigned mode) {
  const std::string partial = path + ".partial." + std::to_string(getpid());
  const int fd = open(partial.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                      static_cast<mode_t>(mode));
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

}  // namespace dtrain::spank
