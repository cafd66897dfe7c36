// SPDX-License-Identifier: Apache-2.0
#pragma once
// One call that turns a freshly started task into a ready communicator:
//   MPI_Init_thread -> TCP connectivity preflight to O(log n) peers -> one all-reduce that says
//   whether every rank agrees (the plugin's DTRAIN_* variables against MPI, fingerprint,
//   endpoint list, preflight) -> communicator (MPI, or NCCL on GPUs). Only when some rank
//   disagrees do the ranks that differ send what differs to rank 0 (agreement.hpp).
// Every step is a non-blocking MPI call polled against one deadline, so a rank that never
// arrives or dies makes every other rank fail with a message instead of hanging.
//
// Without the plugin (plain mpirun/srun: no DTRAIN_* variables), rank 0 says so once, the
// environment check is skipped, and the preflight uses endpoints derived from MPI: each rank
// listens on its host name's IPv4 address with an ephemeral port, and the endpoints go to
// each rank's preflight peers. The fingerprint and preflight checks still run.

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "bootstrap/communicator.hpp"
#include "core/error.hpp"

namespace dtrain::bootstrap {

enum class ThreadLevel { kSingle, kFunneled, kSerialized, kMultiple };

struct BootstrapConfig {
  Backend backend = Backend::kMpi;
  // Unset: DTRAIN_BOOTSTRAP_TIMEOUT (seconds) if set, else 60 s. Covers everything from
  // MPI_Init_thread to the ready communicator.
  std::optional<std::chrono::milliseconds> timeout;
  // Connect deadline per preflight probe (capped by the overall deadline).
  std::chrono::milliseconds probe_timeout{5000};
  bool allow_mismatch = false;  // a fingerprint mismatch only warns
  // Variables changed after dtrain set them (disagreement_after_dtrain) do not stop the
  // bootstrap: dtrain-check reports them as a finding.
  bool allow_changed_variables = false;
  bool preflight = true;
  ThreadLevel thread_level = ThreadLevel::kFunneled;
  bool quiet = false;  // no notes on stderr (errors are always printed)
  // Keep freed memory in the heap so that MPI's per-call scratch buffers stay resident (see
  // bootstrap/heap.hpp). Unset: DTRAIN_KEEP_FREED_MEMORY (0 or 1) if set, else on.
  std::optional<bool> keep_freed_memory;
};

struct BootstrapTimings {  // seconds, this rank; total is the sum of the phases
  double mpi_init = 0;
  double arrival = 0;  // the agreement: every rank arrived and every check agreed (one all-reduce)
  double placement = 0;  // MPI_Comm_split_type and a second agreement, only without PMIx's nodes
  double verdict = 0;    // finding which ranks disagree and how (0 when all agree)
  double preflight = 0;  // this rank's probes of its peers
  double communicator = 0;
  double total = 0;
};

class Session {
 public:
  virtual ~Session() = default;  // releases the communicator, then MPI_Finalize
  virtual Communicator& communicator() = 0;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual int local_rank() const = 0;
  virtual const std::string& hostname() const = 0;
  virtual bool launched_by_plugin() const = 0;
  virtual const BootstrapTimings& timings() const = 0;
  // Whether freed memory stays in the heap (asked for, and the allocator agreed).
  virtual bool keeps_freed_memory() const = 0;
};

// Throws dtrain::Error when the ranks agree that something is wrong (environment mismatch,
// fingerprint mismatch, preflight failure, bad configuration); MPI is finalised first, so the
// caller only prints what() and exits non-zero. The full report (tables, every failing pair)
// is printed on rank 0's stderr before MPI_Finalize, so that a launcher which ends the job at
// the first non-zero exit cannot lose it; what() is one line naming this rank. A deadline that
// passes ends the job (MPI_Abort) after printing which step and, where known, which ranks
// did not arrive.
std::unique_ptr<Session> init(int& argc, char**& argv, const BootstrapConfig& config = {});

// What init() throws when the connectivity preflight failed on connections between nodes (the
// report then names the node to suspect, where one node is in every failed connection): a node
// or the network between nodes is at fault rather than the program, so the job may succeed on
// other nodes. Every rank throws it alike.
class NodeFaultError : public Error {
 public:
  using Error::Error;
};

// The exit status dtrain's programs give for NodeFaultError: EX_TEMPFAIL of sysexits.h, "a
// temporary failure; the user is invited to retry". A batch script requeues its job on it
// (docs/admin.md, "Bad nodes").
inline constexpr int kExitNodeFault = 75;

// "rank 3 on node2": how messages name this process.
std::string describe_self(int rank, const std::string& host);

}  // namespace dtrain::bootstrap
