// SPDX-License-Identifier: Apache-2.0
// The deadline on blocking collectives (bootstrap/collective_deadline.hpp): a call blocked past
// the limit is reported once, naming the call; calls that return in time are not.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/collective_deadline.hpp"

namespace dtrain::bootstrap {
namespace {

using std::chrono::milliseconds;

// A communicator whose calls take `delay` each.
class SlowCommunicator : public Communicator {
 public:
  explicit SlowCommunicator(milliseconds delay) : delay_(delay) {}
  Backend backend() const override { return Backend::kMpi; }
  int rank() const override { return 0; }
  int size() const override { return 2; }
  void all_reduce(const void*, void*, std::size_t, DataType, ReduceOp) override { block(); }
  std::unique_ptr<Request> all_reduce_async(const void*, void*, std::size_t, DataType,
                                            ReduceOp) override {
    return std::make_unique<SlowRequest>(*this);
  }
  void all_gather(const void*, void*, std::size_t, DataType) override { block(); }
  void reduce_scatter(const void*, void*, std::size_t, DataType, ReduceOp) override { block(); }
  void broadcast(const void*, void*, std::size_t, DataType, int) override { block(); }
  void reduce(const void*, void*, std::size_t, DataType, ReduceOp, int) override { block(); }
  void gather(const void*, void*, std::size_t, DataType, int) override { block(); }
  void all_to_all(const void*, void*, std::size_t, DataType) override { block(); }
  void send_recv_ring(const void*, void*, std::size_t, DataType) override { block(); }
  void barrier() override { block(); }
  void synchronize() override {}

 private:
  class SlowRequest : public Request {
   public:
    explicit SlowRequest(SlowCommunicator& comm) : comm_(comm) {}
    void wait() override { comm_.block(); }
    bool test() override { return false; }

   private:
    SlowCommunicator& comm_;
  };
  void block() { std::this_thread::sleep_for(delay_); }
  milliseconds delay_;
};

struct Expiries {
  std::mutex mutex;
  std::vector<std::string> messages;
  DeadlineExpiry recorder() {
    return [this](const std::string& message) {
      std::lock_guard lock(mutex);
      messages.push_back(message);
    };
  }
};

TEST(CollectiveDeadline, ABlockedCallIsReportedOnceNamingIt) {
  SlowCommunicator slow(milliseconds(700));
  Expiries expiries;
  auto comm =
      with_collective_deadline(slow, milliseconds(200), "rank 0 on node1", expiries.recorder());
  comm->barrier();
  std::lock_guard lock(expiries.mutex);
  ASSERT_EQ(expiries.messages.size(), 1u);
  const std::string& message = expiries.messages[0];
  EXPECT_EQ(message.rfind("rank 0 on node1: barrier did not finish within 0.2 s (blocked 0.", 0),
            0u)
      << message;
  EXPECT_NE(message.find("ending with status 75"), std::string::npos) << message;
  EXPECT_NE(message.find("--collective-timeout"), std::string::npos) << message;
}

TEST(CollectiveDeadline, AWaitOnANonBlockingCallIsCoveredToo) {
  SlowCommunicator slow(milliseconds(700));
  Expiries expiries;
  auto comm =
      with_collective_deadline(slow, milliseconds(200), "rank 0 on node1", expiries.recorder());
  float value = 1;
  auto request = comm->all_reduce_async(&value, &value, 1, DataType::kFloat32, ReduceOp::kSum);
  request->wait();
  std::lock_guard lock(expiries.mutex);
  ASSERT_EQ(expiries.messages.size(), 1u);
  EXPECT_NE(expiries.messages[0].find("all_reduce (waiting for a non-blocking one)"),
            std::string::npos)
      << expiries.messages[0];
}

TEST(CollectiveDeadline, CallsThatReturnInTimeAreNotReported) {
  SlowCommunicator quick(milliseconds(20));
  Expiries expiries;
  auto comm =
      with_collective_deadline(quick, milliseconds(400), "rank 0 on node1", expiries.recorder());
  float value = 1;
  // Many quick calls add up to more than the limit: only a single call's time counts.
  for (int i = 0; i < 40; ++i)
    comm->all_reduce(&value, &value, 1, DataType::kFloat32, ReduceOp::kSum);
  std::this_thread::sleep_for(milliseconds(500));  // idle, between calls: not a collective
  std::lock_guard lock(expiries.mutex);
  EXPECT_TRUE(expiries.messages.empty()) << expiries.messages[0];
  EXPECT_EQ(comm->size(), 2);
}

}  // namespace
}  // namespace dtrain::bootstrap
