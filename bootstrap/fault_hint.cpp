// SPDX-License-Identifier: Apache-2.0
#include "bootstrap/fault_hint.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <string>
#include <string_view>

namespace dtrain::bootstrap {

bool write_fault_hint(const core::FaultHint& hint) noexcept {
  try {
    const char* text = std::getenv(core::kFaultHintFdVariable);
    if (text == nullptr) return false;
    const std::string_view value(text);
    int fd = -1;
    const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), fd);
    if (error != std::errc() || end != value.data() + value.size() || fd < 3) return false;
    // Only the plugin's pipe: a number that names a file, socket or pipe of the program's own
    // (it closed the plugin's and the number was reused) is left alone.
    const char* pipe_name = std::getenv(core::kFaultHintPipeVariable);
    if (pipe_name == nullptr) return false;
    const std::string link = "/proc/self/fd/" + std::to_string(fd);
    std::array<char, 64> target{};
    const ssize_t length = readlink(link.c_str(), target.data(), target.size() - 1);
    if (length <= 0 || std::string_view(target.data(), static_cast<std::size_t>(length)) !=
                           std::string_view(pipe_name)) {
      return false;
    }
    const std::string line = core::format_fault_hint(hint);
    // At most PIPE_BUF bytes (kMaxFaultHintLine), so the line arrives whole even when every
    // rank of the node writes at once; the plugin opened the pipe non-blocking.
    ssize_t n = -1;
    do {
      n = write(fd, line.data(), line.size());
    } while (n < 0 && errno == EINTR);
    return n == static_cast<ssize_t>(line.size());
  } catch (...) {
    return false;
  }
}

}  // namespace dtrain::bootstrap
