#pragma once
// The agreement protocol's transport over MPI (fabric.hpp): non-blocking collectives and
// point-to-point messages on one communicator, each tested with MPI_Test. Messages of any size
// arrive through MPI_Iprobe + MPI_Recv. The communicator's error handler must return errors.

#include <mpi.h>

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
  struct Op {
    bool used = false;
    bool done = false;
    bool probing = false;  // a receive of any size not yet matched
    int source = 0;
    int tag = 0;
    MPI_Request request = MPI_REQUEST_NULL;
    std::vector<std::byte> buffer;  // a send's bytes
    Received received;
  };
  OpId allocate();
  Op& at(OpId op);

  MPI_Comm comm_;
  int rank_ = 0;
  int size_ = 0;
  MPI_Op agreement_op_ = MPI_OP_NULL;
  MPI_Op reference_op_ = MPI_OP_NULL;
  MPI_Comm duplicate_ = MPI_COMM_NULL;
  std::vector<Op> ops_;
  std::vector<OpId> free_;
};

}  // namespace dtrain::bootstrap
