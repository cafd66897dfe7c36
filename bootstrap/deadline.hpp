// SPDX-License-Identifier: Apache-2.0
#pragma once
// Deadlines for the bootstrap without relying on MPI's failure handling: agreement steps are
// non-blocking MPI calls polled against a deadline, and a watchdog thread covers the calls
// that have no non-blocking form (MPI_Init_thread, MPI_Comm_split_type, ncclGetUniqueId).

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <span>
#include <string>
#include <thread>

namespace dtrain::bootstrap {

using Clock = std::chrono::steady_clock;

// Polls `done` until it returns true (true) or `deadline` passes (false). `between` runs each
// round, e.g. to accept preflight connections while waiting.
bool poll_until(const std::function<bool()>& done, Clock::time_point deadline,
                const std::function<void()>& between = {});

// One MPI_Testall: whether every request has completed.
bool requests_complete(std::span<MPI_Request> requests);

// poll_until for MPI requests: true when all completed.
bool poll_requests(std::span<MPI_Request> requests, Clock::time_point deadline,
                   const std::function<void()>& between = {});

// The bootstrap's one way of waiting, used by every phase and by the helpers it calls: polls
// `done` against the bootstrap's deadline, rank 0 first (it is the one that can name what is
// missing), and ends the job with a message naming `step` and how to raise
// DTRAIN_BOOTSTRAP_TIMEOUT. `before_abort`, when set, runs first (ncclCommAbort, say).
using DeadlineWaiter =
    std::function<void(const std::function<bool()>& done, const std::string& step,
                       const std::function<void()>& before_abort)>;

// Waits for MPI requests through `wait`.
void wait_for_requests(const DeadlineWaiter& wait, std::span<MPI_Request> requests,
                       const std::string& step);

// Prints "dtrain: <who>: <message>" on stderr and ends the whole job with MPI_Abort; falls back
// to _exit(1) if MPI_Abort itself does not return within a few seconds.
[[noreturn]] void abort_job(const std::string& who, const std::string& message);

// Ends this process with a message when stop() has not been called by `deadline`. The phase
// names what the rank was doing; set it before each step that may block.
class Watchdog {
 public:
  Watchdog(Clock::time_point deadline, std::chrono::milliseconds timeout, std::string who);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  void set_phase(const char* phase) { phase_.store(phase); }
  void set_who(std::string who);
  // Runs `check` on the watchdog's thread at `at` if the process is still in `phase` then;
  // the text it returns replaces the generic guess in the message should the deadline pass.
  // For what only another thread can find out while the main one is blocked in that phase.
  void set_early_check(Clock::time_point at, const char* phase, std::function<std::string()> check);
  // Forgets the early check (and what it holds) unless it is running.
  void clear_early_check();
  void stop();

 private:
  void run();
  Clock::time_point deadline_;
  std::chrono::milliseconds timeout_;
  std::string who_;
  std::atomic<const char*> phase_{"start"};
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopped_ = false;
  Clock::time_point early_at_;
  const char* early_phase_ = "";
  std::function<std::string()> early_check_;
  unsigned changes_ = 0;
  std::thread thread_;
};

}  // namespace dtrain::bootstrap
