// SPDX-License-Identifier: Apache-2.0
#pragma once
// The collective interface shared by every dtrain workload. Two backends implement it:
// MPI (host buffers, runs everywhere) and NCCL (device buffers, GPU machines only).
// Buffers are raw pointers in the backend's memory space (host for MPI, device for NCCL).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace dtrain::bootstrap {

enum class DataType { kFloat32, kFloat64, kInt32, kFloat16, kBFloat16 };
enum class ReduceOp { kSum, kProd, kMin, kMax, kAvg };
enum class Backend { kMpi, kNccl };

std::size_t type_size(DataType type);
const char* type_name(DataType type);  // nccl-tests spelling: float, double, int32, half, bfloat16
const char* op_name(ReduceOp op);      // sum, prod, min, max, avg
const char* backend_name(Backend backend);

// A pending non-blocking collective. wait() is idempotent.
class Request {
 public:
  virtual ~Request() = default;
  virtual void wait() = 0;
  virtual bool test() = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual Backend backend() const = 0;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // Counts are elements per rank, as in NCCL: all_gather sends `count` and receives
  // count*size; reduce_scatter sends count*size and receives `count`.
  virtual void all_reduce(const void* send, void* recv, std::size_t count, DataType type,
                          ReduceOp op) = 0;
  virtual std::unique_ptr<Request> all_reduce_async(const void* send, void* recv, std::size_t count,
                                                    DataType type, ReduceOp op) = 0;
  virtual void all_gather(const void* send, void* recv, std::size_t count, DataType type) = 0;
  virtual void reduce_scatter(const void* send, void* recv, std::size_t count, DataType type,
                              ReduceOp op) = 0;
  virtual void broadcast(const void* send, void* recv, std::size_t count, DataType type,
                         int root) = 0;
  virtual void reduce(const void* send, void* recv, std::size_t count, DataType type, ReduceOp op,
                      int root) = 0;
  // Every rank sends `count` elements; root receives count*size, rank-major (recv is ignored
  // elsewhere and may be null).
  virtual void gather(const void* send, void* recv, std::size_t count, DataType type, int root) = 0;
  // Each rank sends `count` elements to every rank (send and recv hold count*size).
  virtual void all_to_all(const void* send, void* recv, std::size_t count, DataType type) = 0;
  // Ring exchange: send to (rank+1)%size, receive from (rank-1+size)%size.
  virtual void send_recv_ring(const void* send, void* recv, std::size_t count, DataType type) = 0;
  virtual void barrier() = 0;
  // Completes all work queued on the backend's stream (no-op for MPI).
  virtual void synchronize() = 0;
};

}  // namespace dtrain::bootstrap
