// SPDX-License-Identifier: Apache-2.0
#pragma once
// The agreement protocol's transport over MPI (fabric.hpp): non-blocking collectives and
// point-to-point messages on one communicator, each tested with MPI_Test. Messages of any size
// arrive through MPI_Iprobe + MPI_Recv. The communicator's error handler must return errors.
//
// The all-reduce is the fabric's own recursive doubling over MPI_Isend/MPI_Irecv (with the
// usual fold of the ranks beyond the largest power of two): ceil(log2 n) exchanges with a
// partner, the same on every rank, where Open MPI 4.1's MPI_Iallreduce (libnbc) takes a
// binomial reduce to rank 0 and a binomial broadcast back, twice as many steps in a row.

#include <mpi.h>

#include <memory>
#include <span>
#include <vector>

#include "bootstrap/fabric.hpp"

namespace dtrain::bootstrap {

class MpiFabric final : public Fabric {
 public:
  explicit MpiFabric(MPI_Comm comm);
  ~MpiFabric() override;
  MpiFabric(const MpiFabric&) = delete;
  MpiFabric& operator=(const MpiFabric&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Clock::time_point now() const override { return Clock::now(); }
  OpId allreduce(std::span<std::uint64_t> words, Reduction reduction) override;
  OpId broadcast(std::span<std::byte> data, int root) override;
  OpId barrier() override;
  OpId duplicate() override;
  OpId split_node(NodeMembers& out) override;
  OpId send(int dest, int tag, std::vector<std::byte> data, bool synchronous) override;
  OpId receive(int source, int tag) override;
  bool test(OpId op) override;
  Received take(OpId op) override;
  void release(OpId op) override;
  void cancel(OpId op) override;

  // The communicator duplicate() made, now the caller's (MPI_COMM_NULL if none).
  MPI_Comm take_duplicate();

 private:
  // One all-reduce in progress (mpi_fabric.cpp).
  struct Allreduce {
    std::span<std::uint64_t> words;
    Reduction reduction = Reduction::kSum;
    int tag = 0;
    int virtual_rank = -1;   // -1: folded into rank + 1 and waiting for the result
    int mask = 1;            // the next partner is virtual_rank ^ mask
    bool folding = false;    // an odd rank below 2 * extra waiting for rank - 1's words
    bool returning = false;  // sending the result back to rank - 1
    std::vector<std::uint64_t> incoming;
    MPI_Request requests[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  };

  struct Op {
    bool used = false;
    bool done = false;
    bool probing = false;  // a receive of any size not yet matched
    int source = 0;
    int tag = 0;
    MPI_Request request = MPI_REQUEST_NULL;
    std::vector<std::byte> buffer;  // a send's bytes
    Received received;
    std::unique_ptr<Allreduce> allreduce;
  };
  bool advance(Allreduce& state);
  void exchange(Allreduce& state, int partner, bool send, bool receive);
  OpId allocate();
  Op& at(OpId op);

  MPI_Comm comm_;
  int rank_ = 0;
  int size_ = 0;
  MPI_Comm duplicate_ = MPI_COMM_NULL;
  std::vector<Op> ops_;
  std::vector<OpId> free_;
  int allreduces_ = 0;
};

}  // namespace dtrain::bootstrap
