#pragma once
// The I/O of values too long for execve (node_environment decides which and where): the
// per-step directory and its files. Runs as the job's user (user_init), never as root.

#include <cstdint>
#include <string>
#include <vector>

#include "core/node_environment.hpp"

namespace dtrain::core {

// "<base>/dtrain-<uid>-<job>.<step>": where a step's spilled values go on every node.
std::string step_spill_dir(const std::string& base, std::uint32_t uid, std::uint32_t job_id,
                           std::uint32_t step_id);

// step_spill_dir(base, euid, job, step); created 0700 when missing. An existing path must be a
// real directory owned by the caller, or this throws dtrain::Error(kResource).
std::string make_step_env_dir(const std::string& base, std::uint32_t job_id, std::uint32_t step_id);

// Writes each file 0600, never following a link. Throws dtrain::Error(kResource).
void write_spill_files(const std::vector<SpillFile>& files);

}  // namespace dtrain::core
