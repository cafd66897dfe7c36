#pragma once
// Values too long for execve go to a per-step file, and NAME_FILE=path is exported instead.
// Runs as the job's user (user_init), never as root.

#include <cstdint>
#include <string>
#include <vector>

#include "core/step_plan.hpp"

namespace dtrain::core {

// "<base>/dtrain-<uid>-<job>.<step>"; created 0700 when missing. An existing path must be a
// real directory owned by the caller, or this throws dtrain::Error(kResource).
std::string make_step_env_dir(const std::string& base, std::uint32_t job_id,
                              std::uint32_t step_id);

// Replaces each over-long variable of each task (tasks[i] belongs to global rank ranks[i])
// with NAME_FILE. A value shared by several tasks is written once. Returns the names spilled.
std::vector<std::string> spill_oversized(std::vector<std::vector<EnvVar>>& tasks,
                                         const std::vector<std::uint32_t>& ranks,
                                         const std::string& dir);

}  // namespace dtrain::core
