// SPDX-License-Identifier: Apache-2.0
#include "bootstrap/collective_deadline.hpp"

#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>

#include "bootstrap/bootstrap.hpp"

namespace dtrain::bootstrap {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::chrono::milliseconds kWakeEvery{100};

// "10" for whole seconds, "0.2" otherwise.
template <typename Duration>
std::string seconds_text(Duration duration) {
  const double seconds = std::chrono::duration<double>(duration).count();
  char text[32];
  if (seconds == static_cast<double>(static_cast<long long>(seconds))) {
    std::snprintf(text, sizeof text, "%.0f", seconds);
  } else {
    std::snprintf(text, sizeof text, "%.1f", seconds);
  }
  return text;
}

void print_and_exit(const std::string& message) {
  std::fprintf(stderr, "dtrain: %s\n", message.c_str());
  std::fflush(stderr);
  // Not exit(): the main thread is blocked inside MPI or NCCL, and static destructors or
  // MPI_Finalize would block too.
  _exit(kExitNodeFault);
}

// The call in progress and when it began; the watchdog thread reads both.
class Watch {
 public:
  Watch(std::chrono::milliseconds limit, std::string who, DeadlineExpiry on_expiry)
      : limit_(limit),
        who_(std::move(who)),
        on_expiry_(on_expiry ? std::move(on_expiry) : DeadlineExpiry(print_and_exit)),
        thread_([this] { run(); }) {}

  ~Watch() {
    {
      std::lock_guard lock(mutex_);
      stopped_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }

  Watch(const Watch&) = delete;
  Watch& operator=(const Watch&) = delete;

  // The start time is stored before the call's name, and read after it: the watchdog never
  // pairs a call with an older start.
  void arm(const char* call) {
    since_.store(Clock::now().time_since_epoch().count(), std::memory_order_relaxed);
    call_.store(call, std::memory_order_release);
  }
  void disarm() { call_.store(nullptr, std::memory_order_release); }

 private:
  void run() {
    std::unique_lock lock(mutex_);
    while (!wake_.wait_for(lock, kWakeEvery, [this] { return stopped_; })) {
      const char* call = call_.load(std::memory_order_acquire);
      if (call == nullptr) continue;
      const auto since = Clock::time_point(Clock::duration(since_.load(std::memory_order_relaxed)));
      const auto blocked = Clock::now() - since;
      if (blocked < limit_) continue;
      on_expiry_(who_ + ": " + call + " did not finish within " + seconds_text(limit_) +
                 " s (blocked " + seconds_text(blocked) +
                 " s): a peer stopped answering, or the network between the nodes stopped "
                 "carrying its messages; ending with status " +
                 std::to_string(kExitNodeFault) +
                 " (raise the limit with --collective-timeout if the job is just slow)");
      disarm();
    }
  }

  std::chrono::milliseconds limit_;
  std::string who_;
  DeadlineExpiry on_expiry_;
  std::atomic<const char*> call_{nullptr};
  std::atomic<Clock::rep> since_{0};
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopped_ = false;
  std::thread thread_;
};

// Disarms when the call returns, also by an exception.
class Armed {
 public:
  Armed(Watch& watch, const char* call) : watch_(watch) { watch_.arm(call); }
  ~Armed() { watch_.disarm(); }
  Armed(const Armed&) = delete;
  Armed& operator=(const Armed&) = delete;

 private:
  Watch& watch_;
};

class WatchedRequest : public Request {
 public:
  WatchedRequest(std::unique_ptr<Request> inner, Watch& watch)
      : inner_(std::move(inner)), watch_(watch) {}
  void wait() override {
    Armed armed(watch_, "all_reduce (waiting for a non-blocking one)");
    inner_->wait();
  }
  bool test() override { return inner_->test(); }

 private:
  std::unique_ptr<Request> inner_;
  Watch& watch_;
};

class DeadlineCommunicator : public Communicator {
 public:
  DeadlineCommunicator(Communicator& inner, std::chrono::milliseconds limit, std::string who,
                       DeadlineExpiry on_expiry)
      : inner_(inner), watch_(limit, std::move(who), std::move(on_expiry)) {}

  Backend backend() const override { return inner_.backend(); }
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }

  void all_reduce(const void* send, void* recv, std::size_t count, DataType type,
                  ReduceOp op) override {
    Armed armed(watch_, "all_reduce");
    inner_.all_reduce(send, recv, count, type, op);
  }
  std::unique_ptr<Request> all_reduce_async(const void* send, void* recv, std::size_t count,
                                            DataType type, ReduceOp op) override {
    Armed armed(watch_, "all_reduce (starting a non-blocking one)");
    return std::make_unique<WatchedRequest>(inner_.all_reduce_async(send, recv, count, type, op),
                                            watch_);
  }
  void all_gather(const void* send, void* recv, std::size_t count, DataType type) override {
    Armed armed(watch_, "all_gather");
    inner_.all_gather(send, recv, count, type);
  }
  void reduce_scatter(const void* send, void* recv, std::size_t count, DataType type,
                      ReduceOp op) override {
    Armed armed(watch_, "reduce_scatter");
    inner_.reduce_scatter(send, recv, count, type, op);
  }
  void broadcast(const void* send, void* recv, std::size_t count, DataType type,
                 int root) override {
    Armed armed(watch_, "broadcast");
    inner_.broadcast(send, recv, count, type, root);
  }
  void reduce(const void* send, void* recv, std::size_t count, DataType type, ReduceOp op,
              int root) override {
    Armed armed(watch_, "reduce");
    inner_.reduce(send, recv, count, type, op, root);
  }
  void gather(const void* send, void* recv, std::size_t count, DataType type, int root) override {
    Armed armed(watch_, "gather");
    inner_.gather(send, recv, count, type, root);
  }
  void all_to_all(const void* send, void* recv, std::size_t count, DataType type) override {
    Armed armed(watch_, "all_to_all");
    inner_.all_to_all(send, recv, count, type);
  }
  void send_recv_ring(const void* send, void* recv, std::size_t count, DataType type) override {
    Armed armed(watch_, "send_recv_ring");
    inner_.send_recv_ring(send, recv, count, type);
  }
  void barrier() override {
    Armed armed(watch_, "barrier");
    inner_.barrier();
  }
  void synchronize() override {
    Armed armed(watch_, "synchronize (waiting for queued collectives)");
    inner_.synchronize();
  }

 private:
  Communicator& inner_;
  Watch watch_;
};

}  // namespace

std::unique_ptr<Communicator> with_collective_deadline(Communicator& inner,
                                                       std::chrono::milliseconds limit,
                                                       std::string who, DeadlineExpiry on_expiry) {
  return std::make_unique<DeadlineCommunicator>(inner, limit, std::move(who), std::move(on_expiry));
}

}  // namespace dtrain::bootstrap
