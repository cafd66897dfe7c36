// SPDX-License-Identifier: Apache-2.0
#pragma once
// An in-process Communicator for tests: N threads, one per rank, exchanging through shared
// memory. Every collective posts this rank's send pointer, meets the others at a barrier,
// computes its result into a private buffer (reducing in rank order, so every rank gets the
// same bits), meets them again, and only then writes its receive buffer, so in-place calls
// are safe. all_reduce_async completes at once.

#include <barrier>
#include <cstring>
#include <functional>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

#include "bootstrap/communicator.hpp"

namespace dtrain::trainer::testing {

using bootstrap::Backend;
using bootstrap::DataType;
using bootstrap::ReduceOp;

class ThreadHub {
 public:
  explicit ThreadHub(int size)
      : size_(size), barrier_(size), slots_(static_cast<std::size_t>(size)) {}
  int size() const { return size_; }
  std::barrier<>& barrier() { return barrier_; }
  std::vector<const void*>& slots() { return slots_; }

 private:
  int size_;
  std::barrier<> barrier_;
  std::vector<const void*> slots_;
};

class ThreadCommunicator final : public bootstrap::Communicator {
 public:
  ThreadCommunicator(ThreadHub& hub, int rank) : hub_(hub), rank_(rank) {}

  Backend backend() const override { return Backend::kMpi; }
  int rank() const override { return rank_; }
  int size() const override { return hub_.size(); }

  void all_reduce(const void* send, void* recv, std::size_t count, DataType type,
                  ReduceOp op) override {
    exchange(send, recv, count * width(type),
             [&](const std::vector<const void*>& all, std::byte* out) {
               reduce_into(all, out, count, type, op);
             });
  }
  std::unique_ptr<bootstrap::Request> all_reduce_async(const void* send, void* recv,
                                                       std::size_t count, DataType type,
                                                       ReduceOp op) override {
    all_reduce(send, recv, count, type, op);
    return std::make_unique<DoneRequest>();
  }
  void all_gather(const void* send, void* recv, std::size_t count, DataType type) override {
    const std::size_t bytes = count * width(type);
    exchange(send, recv, bytes * static_cast<std::size_t>(size()),
             [&](const std::vector<const void*>& all, std::byte* out) {
               for (std::size_t r = 0; r < all.size(); ++r)
                 std::memcpy(out + r * bytes, all[r], bytes);
             });
  }
  void reduce_scatter(const void* send, void* recv, std::size_t count, DataType type,
                      ReduceOp op) override {
    const std::size_t offset = static_cast<std::size_t>(rank_) * count * width(type);
    exchange(send, recv, count * width(type),
             [&](const std::vector<const void*>& all, std::byte* out) {
               std::vector<const void*> blocks;
               for (const void* p : all)
                 blocks.push_back(static_cast<const std::byte*>(p) + offset);
               reduce_into(blocks, out, count, type, op);
             });
  }
  void broadcast(const void* send, void* recv, std::size_t count, DataType type,
                 int root) override {
    exchange(send, recv, count * width(type),
             [&](const std::vector<const void*>& all, std::byte* out) {
               std::memcpy(out, all[static_cast<std::size_t>(root)], count * width(type));
             });
  }
  void reduce(const void* send, void* recv, std::size_t count, DataType type, ReduceOp op,
              int root) override {
    exchange(send, rank_ == root ? recv : nullptr, count * width(type),
             [&](const std::vector<const void*>& all, std::byte* out) {
               reduce_into(all, out, count, type, op);
             });
  }
  void gather(const void* send, void* recv, std::size_t count, DataType type, int root) override {
    const std::size_t bytes = count * width(type);
    exchange(send, rank_ == root ? recv : nullptr, bytes * static_cast<std::size_t>(size()),
             [&](const std::vector<const void*>& all, std::byte* out) {
               for (std::size_t r = 0; r < all.size(); ++r)
                 std::memcpy(out + r * bytes, all[r], bytes);
             });
  }
  void all_to_all(const void* send, void* recv, std::size_t count, DataType type) override {
    const std::size_t bytes = count * width(type);
    exchange(send, recv, bytes * static_cast<std::size_t>(size()),
             [&](const std::vector<const void*>& all, std::byte* out) {
               for (std::size_t r = 0; r < all.size(); ++r) {
                 std::memcpy(out + r * bytes,
                             static_cast<const std::byte*>(all[r]) +
                                 static_cast<std::size_t>(rank_) * bytes,
                             bytes);
               }
             });
  }
  void send_recv_ring(const void* send, void* recv, std::size_t count, DataType type) override {
    const auto previous = static_cast<std::size_t>((rank_ - 1 + size()) % size());
    exchange(send, recv, count * width(type),
             [&](const std::vector<const void*>& all, std::byte* out) {
               std::memcpy(out, all[previous], count * width(type));
             });
  }
  void barrier() override { hub_.barrier().arrive_and_wait(); }
  void synchronize() override {}

 private:
  class DoneRequest final : public bootstrap::Request {
   public:
    void wait() override {}
    bool test() override { return true; }
  };

  static std::size_t width(DataType type) {
    if (type == DataType::kFloat16 || type == DataType::kBFloat16) {
      throw std::invalid_argument("ThreadCommunicator supports float32, float64 and int32");
    }
    return bootstrap::type_size(type);
  }

  template <typename T>
  void reduce_typed(const std::vector<const void*>& all, std::byte* out, std::size_t count,
                    ReduceOp op) const {
    std::vector<T> acc(static_cast<const T*>(all[0]), static_cast<const T*>(all[0]) + count);
    for (std::size_t r = 1; r < all.size(); ++r) {
      const T* in = static_cast<const T*>(all[r]);
      for (std::size_t k = 0; k < count; ++k) {
        switch (op) {
          case ReduceOp::kSum:
          case ReduceOp::kAvg:
            acc[k] += in[k];
            break;
          case ReduceOp::kProd:
            acc[k] *= in[k];
            break;
          case ReduceOp::kMin:
            acc[k] = std::min(acc[k], in[k]);
            break;
          case ReduceOp::kMax:
            acc[k] = std::max(acc[k], in[k]);
            break;
        }
      }
    }
    if (op == ReduceOp::kAvg) {
      for (T& v : acc) v /= static_cast<T>(all.size());
    }
    std::memcpy(out, acc.data(), count * sizeof(T));
  }

  void reduce_into(const std::vector<const void*>& all, std::byte* out, std::size_t count,
                   DataType type, ReduceOp op) const {
    if (type == DataType::kFloat32) return reduce_typed<float>(all, out, count, op);
    if (type == DataType::kFloat64) return reduce_typed<double>(all, out, count, op);
    if (type == DataType::kInt32) return reduce_typed<std::int32_t>(all, out, count, op);
    throw std::invalid_argument("unsupported type");
  }

  void exchange(const void* send, void* recv, std::size_t out_bytes,
                const std::function<void(const std::vector<const void*>&, std::byte*)>& compute) {
    hub_.slots()[static_cast<std::size_t>(rank_)] = send;
    hub_.barrier().arrive_and_wait();
    std::vector<std::byte> result(out_bytes);
    if (recv != nullptr) compute(hub_.slots(), result.data());
    hub_.barrier().arrive_and_wait();
    if (recv != nullptr && out_bytes > 0) std::memcpy(recv, result.data(), out_bytes);
  }

  ThreadHub& hub_;
  int rank_;
};

// Runs body(comm) on `ranks` threads and returns their results in rank order.
template <typename Result>
std::vector<Result> run_ranks(int ranks, const std::function<Result(ThreadCommunicator&)>& body) {
  ThreadHub hub(ranks);
  std::vector<Result> results(static_cast<std::size_t>(ranks));
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(ranks));
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      ThreadCommunicator comm(hub, r);
      try {
        results[static_cast<std::size_t>(r)] = body(comm);
      } catch (...) {
        errors[static_cast<std::size_t>(r)] = std::current_exception();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (const auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
  return results;
}

}  // namespace dtrain::trainer::testing
