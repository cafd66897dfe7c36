// SPDX-License-Identifier: Apache-2.0
#pragma once
// A thin fake of the spank_* and slurm_* functions the plugin calls, so the real SPANK
// callbacks can be driven without Slurm. Each test configures `fake()` and resets it.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "spank/spank_api.hpp"

namespace dtrain::testing {

struct SpankFake {
  spank_context_t context = S_CTX_REMOTE;
  std::map<std::string, std::string> job_env;  // what spank_getenv sees; spank_setenv writes
  std::map<spank_item_t, std::uint32_t> items;
  std::vector<std::uint32_t> local_to_global;  // S_JOB_LOCAL_TO_GLOBAL_ID
  int task_id = 0;                             // S_TASK_ID
  std::vector<struct spank_option*> options;
  std::vector<std::string> errors;  // slurm_error messages
  std::vector<std::string> infos;   // slurm_info and slurm_verbose messages
  std::vector<std::string> debugs;  // slurm_debug messages
  int fail_setenv_calls = 0;        // make the next N spank_setenv calls fail
  // What slurm_job_step_layout_get answers, by job id: the layout of that job's step, or an
  // errno. A job id not here answers ESLURM_INVALID_JOB_ID (no such step).
  struct StepLayout {
    std::vector<std::string> hosts;
    std::vector<std::vector<std::uint32_t>> task_ids;  // per node
    int error = 0;
  };
  std::map<std::uint32_t, StepLayout> step_layouts;
  // What slurm_kill_job_step was asked; with kill_error set it fails with that errno.
  struct KillRequest {
    std::uint32_t job_id = 0;
    std::uint32_t step_id = 0;
    int signal = 0;
  };
  std::vector<KillRequest> kill_requests;
  int kill_error = 0;
  // What slurm_get_job_steps answers: the step is still held unless step_gone; with
  // step_query_error set the request fails with that errno.
  bool step_gone = false;
  int step_query_error = 0;
  int step_queries = 0;
  // What slurm_load_job answers: a job id here is a het job component with that het_job_id
  // (component 0's job id); any other job is no het job. With load_job_error set it fails.
  std::map<std::uint32_t, std::uint32_t> het_job_ids;
  int load_job_error = 0;
};

SpankFake& fake();
// Also gives the test process back the CPUs it started with (task_init binds it).
void reset_fake();

// The fake's handle; the plugin never dereferences it.
spank_t handle();

}  // namespace dtrain::testing
