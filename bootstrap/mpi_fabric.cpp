// SPDX-License-Identifier: Apache-2.0
#include "bootstrap/mpi_fabric.hpp"

#include <cstdint>
#include <stdexcept>
#include <string>

#include "bootstrap/agreement.hpp"
#include "bootstrap/mpi_communicator.hpp"
#include "core/error.hpp"

namespace dtrain::bootstrap {

namespace {

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
}

MpiFabric::~MpiFabric() {
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

// Tags of the all-reduces' messages: one per all-reduce in turn, after the protocol's.
constexpr int kAllreduceTags = 64;
constexpr int kFirstAllreduceTag = kTagLast + 1;

OpId MpiFabric::allreduce(std::span<std::uint64_t> words, Reduction reduction) {
  const OpId op = allocate();
  auto state = std::make_unique<Allreduce>();
  state->words = words;
  state->reduction = reduction;
  state->tag = kFirstAllreduceTag + allreduces_++ % kAllreduceTags;
  state->incoming.resize(words.size());
  // Below 2 * extra, pairs of ranks fold into one: the even one hands its words to the odd one
  // and waits for the result; everyone else takes part under a virtual rank.
  int power = 1;
  while (power * 2 <= size_) power *= 2;
  const int extra = size_ - power;
  if (rank_ < 2 * extra) {
    if (rank_ % 2 == 0) {
      exchange(*state, rank_ + 1, true, true);  // words out, the result back in
    } else {
      state->folding = true;
      state->virtual_rank = rank_ / 2;
      exchange(*state, rank_ - 1, false, true);
    }
  } else {
    state->virtual_rank = rank_ - extra;
  }
  // It may finish at once (every partner's words already in): then it is done here, and
  // test() must not take it further.
  if (advance(*state)) {
    ops_[op].done = true;
  } else {
    ops_[op].allreduce = std::move(state);
  }
  return op;
}

void MpiFabric::exchange(Allreduce& state, int partner, bool send, bool receive) {
  const int count = mpi_size(state.words.size(), "the all-reduce");
  if (receive) {
    check_mpi(MPI_Irecv(state.incoming.data(), count, MPI_UINT64_T, partner, state.tag, comm_,
                        &state.requests[0]),
              "MPI_Irecv");
  }
  if (send) {
    check_mpi(MPI_Isend(state.words.data(), count, MPI_UINT64_T, partner, state.tag, comm_,
                        &state.requests[1]),
              "MPI_Isend");
  }
}

// Takes the all-reduce as far as it goes without waiting; true when it is complete.
bool MpiFabric::advance(Allreduce& state) {
  int power = 1;
  while (power * 2 <= size_) power *= 2;
  const int extra = size_ - power;
  const auto real_rank = [extra](int virtual_rank) {
    return virtual_rank < extra ? 2 * virtual_rank + 1 : virtual_rank + extra;
  };
  while (true) {
    int done = 0;
    check_mpi(MPI_Testall(2, state.requests, &done, MPI_STATUSES_IGNORE), "MPI_Testall");
    if (!done) return false;
    if (state.virtual_rank < 0 || state.returning) {
      // A folded rank's result arrived in `incoming`, or the result went back: finished.
      if (state.virtual_rank < 0) {
        std::copy(state.incoming.begin(), state.incoming.end(), state.words.begin());
      }
      return true;
    }
    if (state.folding) {
      reduce_words(state.reduction, state.incoming.data(), state.words.data(), state.words.size());
      state.folding = false;
    } else if (state.mask > 1) {
      reduce_words(state.reduction, state.incoming.data(), state.words.data(), state.words.size());
    }
    if (state.mask < power) {
      exchange(state, real_rank(state.virtual_rank ^ state.mask), true, true);
      state.mask <<= 1;
      continue;
    }
    // Every round done: hand the result to the folded partner, if any.
    if (rank_ < 2 * extra) {
      state.returning = true;
      exchange(state, rank_ - 1, true, false);
      continue;
    }
    return true;
  }
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
  if (o.allreduce) {
    if (advance(*o.allreduce)) {
      o.done = true;
      o.allreduce.reset();
    }
    return o.done;
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
