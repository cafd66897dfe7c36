// SPDX-License-Identifier: Apache-2.0
#pragma once
// A minimal C++20 coroutine task for the bootstrap's protocol: the protocol is written as
// straight-line code that suspends on "wait for these operations", and a driver resumes it.
// The MPI driver (bootstrap.cpp) polls MPI between resumptions; the simulation drives
// thousands of ranks' protocols in one thread. Tasks are lazy (they start when awaited or
// started) and resume their awaiter when they finish.

#include <coroutine>
#include <exception>
#include <optional>
#include <utility>
#include <vector>

#include "bootstrap/fabric.hpp"

namespace dtrain::bootstrap {

// What a suspended protocol waits for: every operation of `all`, or any one of `any`, or the
// time `until`, whichever comes first. The protocol finds out which by testing afterwards.
struct WaitFor {
  std::vector<OpId> all;
  std::vector<OpId> any;
  Clock::time_point until;
  std::coroutine_handle<> handle;
};

// One rank's link between its protocol and its driver: the protocol parks its wait here.
struct Suspension {
  WaitFor* pending = nullptr;
};

// co_await Wait{suspension, &wait}, `wait` a named local of the suspending coroutine. (The
// awaitable holds no value with a destructor: GCC 12 destroys such temporaries of a co_await
// expression twice.)
struct Wait {
  Suspension& suspension;
  WaitFor* wait;
  bool await_ready() const noexcept { return false; }
  void await_suspend(std::coroutine_handle<> handle) noexcept {
    wait->handle = handle;
    suspension.pending = wait;
  }
  void await_resume() const noexcept {}
};

template <typename T>
class Task {
 public:
  struct promise_type {
    std::optional<T> value;
    std::exception_ptr error;
    std::coroutine_handle<> continuation;

    Task get_return_object() {
      return Task(std::coroutine_handle<promise_type>::from_promise(*this));
    }
    std::suspend_always initial_suspend() noexcept { return {}; }
    struct FinalAwaiter {
      bool await_ready() const noexcept { return false; }
      std::coroutine_handle<> await_suspend(
          std::coroutine_handle<promise_type> handle) const noexcept {
        const auto next = handle.promise().continuation;
        return next ? next : std::noop_coroutine();
      }
      void await_resume() const noexcept {}
    };
    FinalAwaiter final_suspend() noexcept { return {}; }
    void return_value(T result) { value = std::move(result); }
    void unhandled_exception() { error = std::current_exception(); }
  };

  explicit Task(std::coroutine_handle<promise_type> handle) : handle_(handle) {}
  Task(Task&& other) noexcept : handle_(std::exchange(other.handle_, {})) {}
  Task& operator=(Task&& other) noexcept {
    if (this != &other) {
      if (handle_) handle_.destroy();
      handle_ = std::exchange(other.handle_, {});
    }
    return *this;
  }
  Task(const Task&) = delete;
  Task& operator=(const Task&) = delete;
  ~Task() {
    if (handle_) handle_.destroy();
  }

  // Awaited from another task: runs this one, and resumes the awaiter when it finishes.
  bool await_ready() const noexcept { return false; }
  std::coroutine_handle<> await_suspend(std::coroutine_handle<> awaiter) noexcept {
    handle_.promise().continuation = awaiter;
    return handle_;
  }
  T await_resume() { return take(); }

  // For the driver of a top-level task.
  void start() { handle_.resume(); }
  bool done() const { return handle_.done(); }
  T result() { return take(); }

 private:
  T take() {
    auto& promise = handle_.promise();
    if (promise.error) std::rethrow_exception(promise.error);
    return std::move(*promise.value);
  }
  std::coroutine_handle<promise_type> handle_;
};

}  // namespace dtrain::bootstrap
