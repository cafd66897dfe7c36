// SPDX-License-Identifier: Apache-2.0
#pragma once
// The I/O of memory files (core/memory_file.hpp says what they are): the task makes them in
// task_init, as the job's user, and any reader checks them. Nothing is written to disk, so
// nothing is left behind, and a private /tmp (job_container/tmpfs) or a container's mount
// namespace does not hide them.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/memory_file.hpp"
#include "core/step_plan.hpp"

namespace dtrain::core {

// Creates a memory file named `label` holding `content`, mode 0400, sealed against changes, kept
// open (not close-on-exec, so inherited across fork and exec) at a high descriptor so that shell
// redirections of low ones leave it alone. Returns the descriptor. Throws
// dtrain::Error(kResource).
int create_memory_file(const std::string& label, std::string_view content);

// Puts each value of `vars` marked value_in_memory_file (named NAME_FILE) into a memory file of
// `owner`: equal values share one file, whose label names each of them (the endpoint list under
// DTRAIN_ENDPOINTS and PADDLE_TRAINER_ENDPOINTS is written once per task). Returns each such
// variable's path (/proc/self/fd/N) at its index in `vars`, "" for the others. Throws
// dtrain::Error(kResource); files made before the failure are closed.
std::vector<std::string> export_memory_files(const MemoryFileOwner& owner,
                                             const std::vector<EnvVar>& vars);

// NAME's value as the plugin exported it to this process: the memory file NAME_FILE names,
// checked (memory_file_mismatch) at each of memory_file_places; nullopt when NAME_FILE is unset.
// Throws dtrain::Error: kInvalidInput when the variables are malformed, kMismatch naming every
// place tried and what it held when none is this task's file.
std::optional<std::string> read_memory_file(const std::string& name, const EnvLookup& lookup);

}  // namespace dtrain::core
