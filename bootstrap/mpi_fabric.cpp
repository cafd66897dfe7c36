#include "bootstrap/mpi_fabric.hpp"

#include <cstdint>
#include <stdexcept>
#include <string>

#include "bootstrap/agreement.hpp"
#include "bootstrap/mpi_communicator.hpp"
#include "core/error.hpp"

namespace dtrain::bootstrap {

namespace {

// MPI_Op_create's signature, one function per layout of reduce_words.
void agreement_reduction(void* in, void* inout, int* count, MPI_Datatype*) {
  reduce_words(Reduction::kAgreement, static_cast<const std::uint64_t*>(in),
               static_cast<std::uint64_t*>(inout), static_cast<std::size_t>(*count));
}

void reference_reduction(void* in, void* inout, int* count, MPI_Datatype*) {
  reduce_words(Reduction::kReference, static_cast<const std::uint64_t*>(in),
               static_cast<std::uint64_t*>(inout), static_cast<std::size_t>(*count));
}

int mpi_size(std::size_t bytes, const char* what) {
  if (bytes > static_cast<std::size_t>(INT32_MAX)) {
    throw Error(ErrorKind::kInternal,
                std::string(what) + ": " + std::to_string(bytes) + " bytes exceed one MPI message");
  }
  return static_cast<int>(bytes);
}

}  // namespace

MpiFabric::MpiFabric(MPI_Comm comm) : comm_(comm) {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
  // Commutative: the results are exact sums and minima, in any order.
  check_mpi(MPI_Op_create(&agreement_reduction, 1, &agreement_op_), "MPI_Op_create");
  check_mpi(MPI_Op_create(&reference_reduction, 1, &reference_op_), "MPI_Op_create");
}

MpiFabric::~MpiFabric() {
  if (agreement_op_ != MPI_OP_NULL) MPI_Op_free(&agreement_op_);
  if (reference_op_ != MPI_OP_NULL) MPI_Op_free(&reference_op_);
  if (duplicate_ != MPI_COMM_NULL) MPI_Comm_free(&duplicate_);
}

OpId MpiFabric::allocate() {
  OpId op;
  if (!free_.empty()) {
    op = free_.back();
    free_.pop_back();
  } else {
    op = static_cast<OpId>(ops_.size());
    ops_.emplace_back();
  }
  ops_[op] = Op{};
  ops_[op].used = true;
  return op;
}

MpiFabric::Op& MpiFabric::at(OpId op) {
  if (op >= ops_.size() || !ops_[op].used) {
    throw Error(ErrorKind::kInternal, "bootstrap: use of a released MPI operation");
  }
  return ops_[op];
}

OpId MpiFabric::allreduce(std::span<std::uint64_t> words, Reduction reduction) {
  const OpId op = allocate();
  MPI_Op mpi_op = reduction == Reduction::kSum         ? MPI_SUM
                  : reduction == Reduction::kAgreement ? agreement_op_
                                                       : reference_op_;
  check_mpi(MPI_Iallreduce(MPI_IN_PLACE, words.data(), mpi_size(words.size(), "MPI_Iallreduce"),
                           MPI_UINT64_T, mpi_op, comm_, &ops_[op].request),
            "MPI_Iallreduce");
  return op;
}

OpId MpiFabric::broadcast(std::span<std::byte> data, int root) {
  const OpId op = allocate();
  check_mpi(MPI_Ibcast(data.data(), mpi_size(data.size(), "MPI_Ibcast"), MPI_BYTE, root, comm_,
                       &ops_[op].request),
            "MPI_Ibcast");
  return op;
}

OpId MpiFabric::barrier() {
  const OpId op = allocate();
  check_mpi(MPI_Ibarrier(comm_, &ops_[op].request), "MPI_Ibarrier");
  return op;
}

OpId MpiFabric::duplicate() {
  if (duplicate_ != MPI_COMM_NULL) {
    throw Error(ErrorKind::kInternal, "bootstrap: the communicator was duplicated twice");
  }
  const OpId op = allocate();
  check_mpi(MPI_Comm_idup(comm_, &duplicate_, &ops_[op].request), "MPI_Comm_idup");
  return op;
}

OpId MpiFabric::split_node(NodeMembers& out) {
  const OpId op = allocate();
  // Equal keys keep the ranks in their order here, and spare MPI a reordering all-gather.
  MPI_Comm node = MPI_COMM_NULL;
  check_mpi(MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node),
            "MPI_Comm_split_type");
  int local_size = 0;
  MPI_Comm_size(node, &local_size);
  MPI_Group node_group, group;
  MPI_Comm_group(node, &node_group);
  MPI_Comm_group(comm_, &group);
  std::vector<int> local(static_cast<std::size_t>(local_size));
  for (int i = 0; i < local_size; ++i) local[static_cast<std::size_t>(i)] = i;
  out.ranks.assign(local.size(), 0);
  MPI_Group_translate_ranks(node_group, local_size, local.data(), group, out.ranks.data());
  MPI_Group_free(&node_group);
  MPI_Group_free(&group);
  MPI_Comm_free(&node);
  ops_[op].done = true;
  return op;
}

OpId MpiFabric::send(int dest, int tag, std::vector<std::byte> data, bool synchronous) {
  const OpId op = allocate();
  Op& o = ops_[op];
  o.buffer = std::move(data);
  const int count = mpi_size(o.buffer.size(), "MPI_Isend");
  if (synchronous) {
    check_mpi(MPI_Issend(o.buffer.data(), count, MPI_BYTE, dest, tag, comm_, &o.request),
              "MPI_Issend");
  } else {
    check_mpi(MPI_Isend(o.buffer.data(), count, MPI_BYTE, dest, tag, comm_, &o.request),
              "MPI_Isend");
  }
  return op;
}

OpId MpiFabric::receive(int source, int tag) {
  const OpId op = allocate();
  ops_[op].probing = true;
  ops_[op].source = source == kAnySource ? MPI_ANY_SOURCE : source;
  ops_[op].tag = tag;
  return op;
}

bool MpiFabric::test(OpId op) {
  Op& o = at(op);
  if (o.done) return true;
  if (o.probing) {
    // MPI_Iprobe and MPI_Recv rather than the matched forms (MPI_Improbe, MPI_Mrecv), which
    // not every transport supports (Open MPI 4.1's pml/cm over mtl/ofi fails MPI_Mrecv). Safe
    // here: no other thread receives on this communicator during the bootstrap.
    int found = 0;
    MPI_Status status;
    check_mpi(MPI_Iprobe(o.source, o.tag, comm_, &found, &status), "MPI_Iprobe");
    if (!found) return false;
    int count = 0;
    MPI_Get_count(&status, MPI_BYTE, &count);
    o.received.source = status.MPI_SOURCE;
    o.received.data.resize(static_cast<std::size_t>(count));
    // The message has arrived (its envelope at least), so this returns promptly.
    check_mpi(MPI_Recv(o.received.data.data(), count, MPI_BYTE, status.MPI_SOURCE, o.tag, comm_,
                       MPI_STATUS_IGNORE),
              "MPI_Recv");
    o.probing = false;
    o.done = true;
    return true;
  }
  int flag = 0;
  check_mpi(MPI_Test(&o.request, &flag, MPI_STATUS_IGNORE), "MPI_Test");
  if (flag) {
    o.done = true;
    o.buffer.clear();
  }
  return o.done;
}

Received MpiFabric::take(OpId op) {
  Received received = std::move(at(op).received);
  release(op);
  return received;
}

void MpiFabric::release(OpId op) {
  Op& o = at(op);
  if (!o.done) throw Error(ErrorKind::kInternal, "bootstrap: release of a pending MPI operation");
  o = Op{};
  free_.push_back(op);
}

void MpiFabric::cancel(OpId op) {
  Op& o = at(op);
  if (o.done) return;
  if (!o.probing) {
    throw Error(ErrorKind::kInternal, "bootstrap: only a receive can be withdrawn");
  }
  // Nothing was posted to MPI: a receive of any size exists only as its probe.
  o.probing = false;
  o.done = true;
}

MPI_Comm MpiFabric::take_duplicate() {
  MPI_Comm comm = duplicate_;
  duplicate_ = MPI_COMM_NULL;
  return comm;
}

}  // namespace dtrain::bootstrap
