// SPDX-License-Identifier: Apache-2.0
#pragma once
// How a value too long for execve reaches a task, and how a reader knows it got that value and
// no other. The task holds a sealed memory file (memfd) with the value; the plugin exports
//   NAME_FILE  /proc/self/fd/N: the task and every process it starts that keeps its descriptors
//              open it there, in any PID namespace, dumpable or not
//   NAME_HASH  XXH3-64 of the value, 16 hex digits (DTRAIN_ENDPOINTS_HASH, set in every step)
// and removes NAME. The memfd's name, its label, says whose file it is: readlink(2) of any path
// to it gives "/memfd:dtrain:JOB.STEP:rankRANK:NAME[,NAME...] (deleted)", JOB, STEP and RANK
// being the task's SLURM_JOB_ID, SLURM_STEP_ID and SLURM_PROCID. A reader checks the label, the
// seals and the hash, so a path that reaches another step's task (a reused PID) or another file
// (a descriptor closed and reused) is noticed. Pure: memory_file_io does the I/O.

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace dtrain::core {

// The task a memory file belongs to, as Slurm names it in the task's environment.
struct MemoryFileOwner {
  std::uint32_t job_id = 0;   // SLURM_JOB_ID (a het step's: component 0's)
  std::uint32_t step_id = 0;  // SLURM_STEP_ID
  std::uint32_t rank = 0;     // SLURM_PROCID
  bool operator==(const MemoryFileOwner&) const = default;
};

// The values a large step puts into memory files; each has a NAME_FILE and a NAME_HASH form.
std::span<const std::string_view> memory_file_value_names();

// "dtrain:JOB.STEP:rankRANK:NAME[,NAME...]", the names of the values the file holds (equal
// values share one file). Throws Error(kInternal) past memfd_create's 249 bytes.
std::string memory_file_label(const MemoryFileOwner& owner, const std::vector<std::string>& names);

struct MemoryFileLabel {
  MemoryFileOwner owner;
  std::vector<std::string> names;
};
// The label in a descriptor's link target ("/memfd:LABEL (deleted)"); nullopt for anything that
// is not a dtrain memory file.
std::optional<MemoryFileLabel> parse_memory_file_link(std::string_view target);

// "/proc/self/fd/N", and back; nullopt for any other form.
std::string memory_file_path(int descriptor);
std::optional<int> memory_file_descriptor(std::string_view path);

// NAME_HASH: XXH3-64 of the value, 16 lower-case hex digits (the format of
// DTRAIN_ENDPOINTS_HASH).
std::string value_hash(std::string_view value);

using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;

// What a reader of NAME_FILE expects, from its environment.
struct MemoryFileExpectation {
  std::string name;  // NAME
  std::string path;  // NAME_FILE
  int descriptor = -1;
  std::string hash;  // NAME_HASH
  MemoryFileOwner owner;
  std::optional<std::uint32_t> task_pid;  // SLURM_TASK_PID: the task's PID where it was made
};

// nullopt when NAME_FILE is unset. Throws Error(kInvalidInput) naming the variable when
// NAME_FILE is not a memory-file path, NAME_HASH is missing or malformed, or the task's Slurm
// ids are missing.
std::optional<MemoryFileExpectation> memory_file_expectation(const std::string& name,
                                                             const EnvLookup& lookup);

// Where to look, in order: NAME_FILE (this process's descriptor), then the task's own
// /proc/<SLURM_TASK_PID>/fd/N for a process that is not the task and may not have inherited the
// descriptor (a child that closed its descriptors: Python's subprocess does by default).
std::vector<std::string> memory_file_places(const MemoryFileExpectation& expected,
                                            std::uint32_t own_pid);

// What a reader found behind one place.
struct MemoryFileSeen {
  std::string link_target;  // readlink of the opened descriptor
  bool sealed = false;      // F_SEAL_SEAL, F_SEAL_SHRINK, F_SEAL_GROW and F_SEAL_WRITE all set
  std::string content;
};

// "" when `seen` is the file `expected` describes, else what it is instead, naming `place`.
std::string memory_file_mismatch(const MemoryFileExpectation& expected, const std::string& place,
                                 const MemoryFileSeen& seen);

}  // namespace dtrain::core
