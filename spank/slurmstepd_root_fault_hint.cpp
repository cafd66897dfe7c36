// SPDX-License-Identifier: Apache-2.0
#include "spank/slurmstepd_root_fault_hint.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <string>

#include "core/error.hpp"
#include "core/fault_hint.hpp"
#include "core/net_io.hpp"
#include "spank/root_files.hpp"
#include "spank/spank_io.hpp"
#include "spank/state.hpp"

namespace dtrain::spank {
namespace {

// A pipe's default capacity on Linux (pipe(7)): all that a step's tasks can have written.
constexpr std::size_t kMaxHintBytes = 65536;

std::string read_available(int fd) {
  std::string bytes;
  std::array<char, 4096> chunk{};
  while (bytes.size() < kMaxHintBytes) {
    const ssize_t n = read(fd, chunk.data(), chunk.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // EAGAIN: nothing more; 0: every write end closed
    bytes.append(chunk.data(), static_cast<std::size_t>(n));
  }
  return bytes;
}

}  // namespace

void open_fault_hint_pipe() {
  PluginState& st = state();
  std::array<int, 2> ends{-1, -1};
  // Both ends non-blocking: a task's write into a full pipe fails instead of hanging the task.
  if (pipe2(ends.data(), O_NONBLOCK) != 0) {
    throw Error(ErrorKind::kResource,
                std::string("cannot make the fault hint pipe: ") + std::strerror(errno));
  }
  // The read end stays in slurmstepd; the write end is inherited by the tasks.
  if (fcntl(ends[0], F_SETFD, FD_CLOEXEC) != 0) {
    const int error = errno;
    close(ends[0]);
    close(ends[1]);
    throw Error(ErrorKind::kResource,
                std::string("cannot set up the fault hint pipe: ") + std::strerror(error));
  }
  st.fault_hint_read_fd = ends[0];
  st.fault_hint_write_fd = ends[1];
}

void export_fault_hint_fd(spank_t sp) {
  PluginState& st = state();
  if (st.fault_hint_write_fd < 0) return;
  if (st.fault_hint_read_fd >= 0) close(st.fault_hint_read_fd);
  st.fault_hint_read_fd = -1;
  struct stat pipe_stat {};
  if (fstat(st.fault_hint_write_fd, &pipe_stat) != 0) {
    throw Error(ErrorKind::kResource,
                std::string("cannot stat the fault hint pipe: ") + std::strerror(errno));
  }
  set_env(sp, core::kFaultHintFdVariable, std::to_string(st.fault_hint_write_fd));
  set_env(sp, core::kFaultHintPipeVariable,
          "pipe:[" + std::to_string(static_cast<unsigned long long>(pipe_stat.st_ino)) + "]");
}

void keep_fault_hints(spank_t sp) {
  PluginState& st = state();
  if (st.fault_hint_read_fd < 0) return;
  close(st.fault_hint_write_fd);
  st.fault_hint_write_fd = -1;
  const std::string bytes = read_available(st.fault_hint_read_fd);
  close(st.fault_hint_read_fd);
  st.fault_hint_read_fd = -1;
  if (bytes.empty()) return;

  const std::uint32_t job = get_u32(sp, S_JOB_ID, "S_JOB_ID");
  const std::uint32_t step = get_u32(sp, S_JOB_STEPID, "S_JOB_STEPID");
  const std::string step_name = std::to_string(job) + "." + std::to_string(step);
  const core::ParsedFaultHints parsed = core::parse_fault_hints(bytes);
  if (parsed.rejected > 0) {
    log_info("fault hint of step " + step_name + ": " + std::to_string(parsed.rejected) +
             " line(s) that are not 'suspect NODE DETAIL' ignored");
  }
  if (parsed.hints.empty()) return;
  std::string content;
  for (const auto& hint : parsed.hints) {
    log_info("fault hint of step " + step_name + ": suspect " + hint.node +
             (hint.detail.empty() ? "" : " (" + hint.detail + ")"));
    content += core::format_fault_hint(hint);
  }
  const std::string dir = core::fault_hint_dir(st.config.topology_cache);
  make_root_dir(dir.substr(0, dir.rfind('/')), 0755);
  make_root_dir(dir, 0700);
  write_root_file(dir + "/" + core::fault_hint_file_name(job, step, core::local_host_name()),
                  content, 0600);
}

}  // namespace dtrain::spank
