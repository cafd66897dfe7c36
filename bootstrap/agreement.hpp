// SPDX-License-Identifier: Apache-2.0
#pragma once
// The bootstrap's agreement protocol, run by every rank after MPI_Init (bootstrap/README.md,
// "Steps" and "Cost"):
//
//   arrival   each rank tells its two ring neighbours that it arrived (one empty message each
//             way), so that a rank that never comes can be named without anyone gathering
//             every rank's arrival;
//   preflight each rank probes its O(log n) peers (peers.hpp), at the endpoints of the
//             plugin's list or, without the plugin, at endpoints exchanged with those peers;
//   agreement one all-reduce of kAgreementWords words: minima of hashes and of their
//             complements (equal minima prove every rank holds the same fingerprint and the
//             same endpoint list), "all ok" words for the checks each rank makes alone, and
//             sums that check MPI's nodes against the plugin's node ranks;
//   closing   the communicator for the job (MPI_Comm_idup), or a barrier.
//
// Only when the agreement finds a disagreement does the diagnostic path run: a reduction finds
// the value most ranks hold, only the ranks that differ from it (or found something wrong)
// send a record, through a binomial tree to rank 0, and rank 0 writes the report with the
// same messages as ever. Its cost grows with the number of such ranks, not with n.
//
// Written against Fabric (fabric.hpp) as a coroutine (task.hpp), so that the simulation in
// tests/bootstrap runs this code for 100,000 ranks in one process.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "bootstrap/endpoints.hpp"
#include "bootstrap/environment.hpp"
#include "bootstrap/fabric.hpp"
#include "bootstrap/fingerprint.hpp"
#include "bootstrap/preflight_report.hpp"
#include "bootstrap/task.hpp"
#include "core/error.hpp"

namespace dtrain::bootstrap {

// Which ranks share this rank's node as MPI groups them, in rank order (this rank included).
struct NodeMembers {
  std::vector<int> ranks;
};

// The plugin's claims (DtrainEnv's numbers).
struct EnvClaims {
  bool present = false;
  int rank = -1;
  int world_size = -1;
  int local_rank = -1;
  int local_world_size = -1;
  int node_rank = -1;
  int nnodes = -1;
};

// What one rank knows about itself when the protocol starts; nothing here depends on n
// except `list`, which is only read on the diagnostic path.
struct RankFacts {
  std::string host;
  EnvClaims env;
  std::uint64_t list_hash = 0;  // XXH3 of the endpoint list's text (0 without the plugin)
  std::string list_source;      // "DTRAIN_ENDPOINTS" or "DTRAIN_ENDPOINTS_FILE=<path>"
  std::size_t list_count = 0;   // entries in the list
  // This rank's own entry and its preflight peers' (scan_endpoint_list).
  std::map<std::size_t, std::string> list_entries;
  const EndpointList* list = nullptr;  // the whole list, for the diagnostic search only
  // MPI's node as the launcher's PMIx server tells it; nullopt: ask MPI (MPI_Comm_split_type).
  std::optional<NodeMembers> node;
  std::vector<std::string> problems;  // what this rank found wrong on its own
  Fingerprint fingerprint;
  bool preflight = true;
  std::string listen_endpoint;  // where this rank listens for the preflight
  int listen_errno = 0;         // 0: listening
};

struct ProtocolConfig {
  bool allow_mismatch = false;  // a fingerprint difference only warns
  bool quiet = false;           // no notes
  bool duplicate = true;        // close with the job's communicator (Fabric::duplicate)
  std::chrono::milliseconds timeout{60'000};
  Clock::time_point deadline;  // rank 0 gives up here, the others kFollowerGrace later
};

// The rank 0 gives up first, naming what it knows; the others wait this much longer so that
// rank 0's message is the one that reaches the user.
inline constexpr std::chrono::milliseconds kFollowerGrace{1500};

struct ProtocolHooks {
  // Probes the targets (every peer's outcome, error 0 when connected). `early`: the endpoints
  // come from the plugin's list, so a peer may not listen yet and refusals are retried.
  std::function<std::vector<ProbeOutcome>(const std::vector<ProbeTarget>&, bool early)> probe;
  std::function<void()> probes_done;       // every rank finished probing: the listener may close
  std::function<void(const char*)> phase;  // what the rank is doing, for the watchdog
};

struct ProtocolTimings {  // seconds
  double preflight = 0;
  double arrival = 0;
  double placement = 0;
  double verdict = 0;
  double communicator = 0;
};

// How many ranks of the suspect node rank 0 names in its verdict: one is enough for the node's
// fault hint, a few cover ranks that die before they write it.
inline constexpr std::size_t kMaxSuspectRanks = 8;

struct Outcome {
  enum class Kind { kReady, kFailed, kTimedOut };
  Kind kind = Kind::kReady;
  ErrorKind error = ErrorKind::kMismatch;
  std::string report;              // kFailed, rank 0: the full report
  std::string summary;             // kFailed: this rank's one line
  std::vector<std::string> notes;  // rank 0 prints each after "dtrain: " (warnings, notes)
  // kFailed: the preflight failed on connections between nodes, which every rank knows from
  // rank 0's verdict: a node or the network between nodes is at fault, not the program.
  bool node_fault = false;
  // kFailed with node_fault: this rank runs on the node the report names as the suspect (one of
  // the first kMaxSuspectRanks ranks rank 0 knows there), and leaves the fault hint.
  bool on_suspect_node = false;
  std::string timeout;  // kTimedOut: "timed out after N s <step><what is known>"
  int local_rank = 0;   // MPI's placement of this rank
  int local_size = 1;
  ProtocolTimings timings;
};

// Runs the protocol for this rank. `fabric` and `suspension` must outlive the task.
Task<Outcome> run_protocol(Fabric& fabric, Suspension& suspension, RankFacts facts,
                           ProtocolConfig config, ProtocolHooks hooks);

// The reductions of Fabric::allreduce: inout[i] = in[i] (op) inout[i].
inline constexpr std::size_t kAgreementWords = 18;
inline constexpr std::size_t kReferenceWords = 9;
void reduce_words(Reduction reduction, const std::uint64_t* in, std::uint64_t* inout,
                  std::size_t count);

// The protocol's point-to-point tags (on MPI_COMM_WORLD while the bootstrap runs; every
// message is received before init() returns).
inline constexpr int kTagFirst = 0x6470;
inline constexpr int kTagLast = 0x6479;

}  // namespace dtrain::bootstrap
