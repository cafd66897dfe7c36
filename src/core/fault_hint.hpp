// SPDX-License-Identifier: Apache-2.0
#pragma once
// The fault hint: what a task tells the epilog's node check about a failed step (docs/admin.md,
// "Bad nodes"). A task that found its own node suspect (the bootstrap's preflight names the node
// that is an end of every failed connection) writes one line to the pipe DTRAIN_FAULT_HINT_FD,
// which slurmstepd holds as root; slurmstepd keeps the valid lines in a root-only file; the job's
// epilog on that node reads them and runs its deeper checks.
//
// A hint is never evidence. It is what the job says, so it only chooses which checks root runs
// on the node it names, and it is logged with their outcome; a node is drained only when root's
// own checks fail. A hint that names another node than the one it was written on is logged and
// ignored: each node hears only its own tasks.
//
// Pure: bytes in, hints out. The pipe and the files are spank/slurmstepd_root_fault_hint.cpp's
// and spank/slurmd_epilog_node_check.cpp's.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/config.hpp"

namespace dtrain::core {

// The environment variables of each task: the pipe's write end (a descriptor number), and the
// pipe itself as /proc/self/fd/N names it ("pipe:[INODE]"), so that a writer can tell the
// plugin's pipe from one of the program's own that took the number after the program closed it.
inline constexpr const char* kFaultHintFdVariable = "DTRAIN_FAULT_HINT_FD";
inline constexpr const char* kFaultHintPipeVariable = "DTRAIN_FAULT_HINT_PIPE";

struct FaultHint {
  std::string node;    // the node the task suspects: its own host name
  std::string detail;  // why, in the task's words (printable ASCII, cut to kMaxFaultHintDetail)
  bool operator==(const FaultHint&) const = default;
};

// Bounds on what root keeps from a job: a line, its detail, and the lines of one step.
inline constexpr std::size_t kMaxFaultHintLine = 512;
inline constexpr std::size_t kMaxFaultHintDetail = 160;
inline constexpr std::size_t kMaxFaultHintsPerStep = 4;

// The line a task writes: "suspect NODE DETAIL\n". Throws dtrain::Error when `node` is not a
// node name; control characters in `detail` become spaces and it is cut to kMaxFaultHintDetail.
std::string format_fault_hint(const FaultHint& hint);

struct ParsedFaultHints {
  std::vector<FaultHint> hints;  // the valid lines, at most kMaxFaultHintsPerStep, duplicates once
  std::size_t rejected = 0;      // lines that were not hints (or beyond the bound)
};

// Reads what a step's tasks wrote (or root's file, which holds the same lines). Never throws:
// every line that is not "suspect NODE DETAIL" with a valid node name is counted as rejected.
ParsedFaultHints parse_fault_hints(std::string_view bytes);

// Where slurmstepd keeps a step's hints for the epilog: "fault-hints" in the plugin's root-only
// directory (topology_cache=, /run/dtrain when the cache is off).
std::string fault_hint_dir(const TopologyCache& cache);
// One file per job, step and host ("J.S.HOST"): the host's name keeps nodes apart where several
// share a /run (the local cluster's emulated nodes).
std::string fault_hint_file_name(std::uint32_t job, std::uint32_t step, std::string_view host);
// Whether `name` is one of fault_hint_file_name(job, *, host).
bool is_fault_hint_file_of(std::string_view name, std::uint32_t job, std::string_view host);

// A Slurm node name as dtrain accepts it from a job: 1-255 of [A-Za-z0-9._-], not starting
// with '-' or '.'.
bool is_node_name(std::string_view text);

}  // namespace dtrain::core
