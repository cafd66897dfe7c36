// SPDX-License-Identifier: Apache-2.0
#include "bootstrap/deadline.hpp"

#include <sched.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstring>
#include <exception>

namespace dtrain::bootstrap {

namespace {
constexpr std::chrono::milliseconds kMessageDrainTime{500};
constexpr std::chrono::milliseconds kSpinFor{50};
}  // namespace

bool requests_complete(std::span<MPI_Request> requests) {
  int done = 0;
  MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done, MPI_STATUSES_IGNORE);
  return done != 0;
}

bool poll_requests(std::span<MPI_Request> requests, Clock::time_point deadline,
                   const std::function<void()>& between) {
  return poll_until([requests] { return requests_complete(requests); }, deadline, between);
}

void wait_for_requests(const DeadlineWaiter& wait, std::span<MPI_Request> requests,
                       const std::string& step) {
  wait([requests] { return requests_complete(requests); }, step, {});
}

bool poll_until(const std::function<bool()>& done, Clock::time_point deadline,
                const std::function<void()>& between) {
  const auto started = Clock::now();
  while (true) {
    if (done()) return true;
    if (between) between();
    const auto now = Clock::now();
    if (now >= deadline) return false;
    // As MPI's own waits do (with mpi_yield_when_idle): offer the core to whoever else can
    // run, and come back at once when nobody can, so that each step of a collective is taken
    // as soon as its message is in. A wait longer than kSpinFor is a rank waiting for a slow or
    // missing one: it then sleeps between polls instead.
    if (now - started > kSpinFor) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    } else {
      sched_yield();
    }
  }
}

void abort_job(const std::string& who, const std::string& message) {
  std::fprintf(stderr, "dtrain: %s: %s\n", who.c_str(), message.c_str());
  std::fflush(stderr);
  std::signal(SIGALRM, SIG_DFL);
  alarm(10);
  MPI_Abort(MPI_COMM_WORLD, 1);
  _exit(1);
}

Watchdog::Watchdog(Clock::time_point deadline, std::chrono::milliseconds timeout, std::string who)
    : deadline_(deadline), timeout_(timeout), who_(std::move(who)), thread_([this] { run(); }) {}

Watchdog::~Watchdog() {
  stop();
}

void Watchdog::set_who(std::string who) {
  std::lock_guard lock(mutex_);
  who_ = std::move(who);
}

void Watchdog::set_early_check(Clock::time_point at, const char* phase,
                               std::function<std::string()> check) {
  {
    std::lock_guard lock(mutex_);
    early_at_ = at;
    early_phase_ = phase;
    early_check_ = std::move(check);
    ++changes_;
  }
  wake_.notify_all();
}

void Watchdog::clear_early_check() {
  std::function<std::string()> dropped;
  {
    std::lock_guard lock(mutex_);
    dropped = std::move(early_check_);
    early_check_ = nullptr;
    ++changes_;
  }
  wake_.notify_all();
}

void Watchdog::stop() {
  {
    std::lock_guard lock(mutex_);
    stopped_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Watchdog::run() {
  std::unique_lock lock(mutex_);
  std::string finding;
  while (true) {
    const bool early = early_check_ && early_at_ < deadline_;
    const auto wake = early ? early_at_ : deadline_;
    const unsigned seen = changes_;
    if (wake_.wait_until(lock, wake, [&] { return stopped_ || changes_ != seen; })) {
      if (stopped_) return;
      continue;
    }
    if (!early) break;
    auto check = std::move(early_check_);
    early_check_ = nullptr;
    const char* phase = early_phase_;
    lock.unlock();
    if (std::strcmp(phase_.load(), phase) == 0) {
      try {
        finding = check();
      } catch (const std::exception&) {
        finding.clear();  // the generic guess below still goes out
      }
    }
    lock.lock();
    if (stopped_) return;
  }
  const auto seconds = std::chrono::duration<double>(timeout_).count();
  if (finding.empty()) {
    finding = "Another rank probably died or never started (check the other tasks' output)";
  }
  std::fprintf(stderr,
               "dtrain: %s: bootstrap did not finish within %.0f s; still in %s. %s; raise the "
               "limit with DTRAIN_BOOTSTRAP_TIMEOUT=<seconds> or --timeout if the job is just "
               "slow\n",
               who_.c_str(), seconds, phase_.load(), finding.c_str());
  std::fflush(stderr);
  // When a task of the step was killed by a signal, srun stops reading the tasks' output as soon
  // as the last task has exited (client_io_handler_abort in Slurm's step_launch.c). Exiting at
  // once races the message through slurmstepd against the exit report, and the message can lose.
  std::this_thread::sleep_for(kMessageDrainTime);
  _exit(1);
}

}  // namespace dtrain::bootstrap
