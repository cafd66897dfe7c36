#include "bootstrap/deadline.hpp"

#include <unistd.h>

#include <csignal>
#include <cstdio>

namespace dtrain::bootstrap {

bool poll_requests(std::span<MPI_Request> requests, Clock::time_point deadline,
                   const std::function<void()>& between) {
  const auto started = Clock::now();
  while (true) {
    int done = 0;
    MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done, MPI_STATUSES_IGNORE);
    if (done) return true;
    if (between) between();
    const auto now = Clock::now();
    if (now >= deadline) return false;
    // Spin briefly so fast exchanges stay fast, then yield the core to the other ranks.
    if (now - started > std::chrono::milliseconds(2)) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
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
  if (wake_.wait_until(lock, deadline_, [this] { return stopped_; })) return;
  const auto seconds = std::chrono::duration<double>(timeout_).count();
  std::fprintf(stderr,
               "dtrain: %s: bootstrap did not finish within %.0f s; still in %s. Another rank "
               "probably died or never started (check the other tasks' output); raise the limit "
               "with DTRAIN_BOOTSTRAP_TIMEOUT=<seconds> or --timeout if the job is just slow\n",
               who_.c_str(), seconds, phase_.load());
  std::fflush(stderr);
  _exit(1);
}

}  // namespace dtrain::bootstrap
