// SPDX-License-Identifier: Apache-2.0
#pragma once
// What the bootstrap's agreement protocol (agreement.hpp) needs from its transport: a few
// non-blocking collectives and point-to-point messages on one communicator, tested without
// blocking. Two implementations: MPI on MPI_COMM_WORLD (mpi_fabric.cpp), and the in-process
// simulation of n ranks that counts what every rank sends, receives and allocates
// (tests/bootstrap/sim_fabric.hpp). The protocol is written against this interface only, so
// the simulation runs the bootstrap's own code.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace dtrain::bootstrap {

using Clock = std::chrono::steady_clock;

// A posted operation of one rank. Valid until released (take() or release()).
using OpId = std::uint32_t;
inline constexpr int kAnySource = -1;

// The reductions the protocol uses, over arrays of uint64_t; reduce_words (agreement.hpp)
// applies them, so that every transport combines exactly alike.
enum class Reduction : int {
  kSum,        // every word: sum modulo 2^64
  kAgreement,  // the agreement's layout: minima, sums, and sums modulo 2^61 - 1
  kReference,  // the reference round's layout: sums, then minima
};

struct NodeMembers;  // agreement.hpp

struct Received {
  int source = -1;
  std::vector<std::byte> data;
};

class Fabric {
 public:
  virtual ~Fabric() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual Clock::time_point now() const = 0;

  // Collectives: every rank posts the same ones in the same order. Buffers must stay valid
  // until the operation completed.
  virtual OpId allreduce(std::span<std::uint64_t> words, Reduction reduction) = 0;  // in place
  virtual OpId broadcast(std::span<std::byte> data, int root) = 0;
  virtual OpId barrier() = 0;
  // The communicator the job uses afterwards (MPI: MPI_Comm_idup); the transport keeps it.
  virtual OpId duplicate() = 0;
  // Which ranks share this rank's node, as the MPI library groups them (MPI:
  // MPI_Comm_split_type(MPI_COMM_TYPE_SHARED), which has no non-blocking form: it completes
  // before the call returns). Fills `out` when the operation completes.
  virtual OpId split_node(NodeMembers& out) = 0;

  // Point to point. A synchronous send completes only once the receiver has matched it.
  virtual OpId send(int dest, int tag, std::vector<std::byte> data, bool synchronous) = 0;
  // A message of any size from `source` (or kAnySource) with `tag`.
  virtual OpId receive(int source, int tag) = 0;

  // Whether the operation completed; never blocks. Stays true once true.
  virtual bool test(OpId op) = 0;
  // A completed receive's message; releases the operation.
  virtual Received take(OpId op) = 0;
  // Releases a completed operation.
  virtual void release(OpId op) = 0;
  // Withdraws a receive that has not completed; test() reports it complete afterwards (with
  // no message) or once a message it had already matched arrived.
  virtual void cancel(OpId op) = 0;

  // The protocol reports the records it decodes, for the simulation's counts.
  virtual void note_records_decoded(std::size_t count) { (void)count; }
};

}  // namespace dtrain::bootstrap
