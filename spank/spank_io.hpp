// SPDX-License-Identifier: Apache-2.0
#pragma once
// Checked wrappers around the spank_* calls dtrain uses, and "dtrain:"-prefixed logging.
// Every wrapper turns a SPANK failure into dtrain::Error naming the call.

#include "spank/spank_api.hpp"

#include <cstdint>
#include <optional>
#include <string>

namespace dtrain::spank {

void log_error(const std::string& message);
void log_info(const std::string& message);
void log_verbose(const std::string& message);
void log_debug(const std::string& message);
// For task_init: the task's own stderr, where the user reads the job's output (Slurm
// shows slurm_info from task_init only in slurmd's log).
void warn_task(const std::string& message);
void error_task(const std::string& message);

std::uint32_t get_u32(spank_t sp, spank_item_t item, const char* what);
int get_int(spank_t sp, spank_item_t item, const char* what);
std::uint32_t local_to_global(spank_t sp, std::uint32_t local_id);

// The job's value of `name`, or nothing when it is unset. Grows the buffer as needed.
std::optional<std::string> get_env(spank_t sp, const char* name);
void set_env(spank_t sp, const std::string& name, const std::string& value);
void unset_env(spank_t sp, const std::string& name);

}  // namespace dtrain::spank
