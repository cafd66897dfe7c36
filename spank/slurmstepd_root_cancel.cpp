// SPDX-License-Identifier: Apache-2.0
#include "spank/slurmstepd_root_cancel.hpp"

#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "core/error.hpp"
#include "core/hostlist.hpp"
#include "core/layout.hpp"
#include "spank/slurmctld_job.hpp"
#include "spank/spank_io.hpp"
#include "spank/state.hpp"

namespace dtrain::spank {
namespace {

constexpr std::chrono::milliseconds kMessageDrainTime{250};
// SHOW_ALL (jobs in hidden partitions too): SLURM_BIT(0), written out since 24.11's macro is an
// old-style cast.
constexpr std::uint16_t kShowAll = 1;

// slurm_kill_job_step's signature changed twice: 23.11 added the flags, 25.11 takes the step id
// as a slurm_step_id_t.
int cancel_step(std::uint32_t job_id, std::uint32_t step_id) {
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(25, 11, 0)
  slurm_step_id_t id{};
  id.job_id = job_id;
  id.step_id = step_id;
  id.step_het_comp = NO_VAL;
  return slurm_kill_job_step(&id, SIGKILL, 0);
#elif SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(23, 11, 0)
  return slurm_kill_job_step(job_id, step_id, SIGKILL, 0);
#else
  return slurm_kill_job_step(job_id, step_id, SIGKILL);
#endif
}

// Whether slurmctld still holds the step: false once it completed (every task ended, or another
// refusing node's cancel ended it), true while it runs or when slurmctld cannot say.
bool step_still_held(std::uint32_t job_id, std::uint32_t step_id) {
  job_step_info_response_msg_t* steps = nullptr;
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(25, 11, 0)
  slurm_step_id_t id{};
  id.job_id = job_id;
  id.step_id = step_id;
  id.step_het_comp = NO_VAL;
  const int rc = slurm_get_job_steps(&id, &steps, kShowAll);
#else
  const int rc = slurm_get_job_steps(0, job_id, step_id, &steps, kShowAll);
#endif
  std::unique_ptr<job_step_info_response_msg_t, decltype(&slurm_free_job_step_info_response_msg)>
      owned(steps, &slurm_free_job_step_info_response_msg);
  if (rc != SLURM_SUCCESS || !steps) return true;
  for (std::uint32_t i = 0; i < steps->job_step_count; ++i) {
    const auto& step = steps->job_steps[i];
    if (step.step_id.job_id == job_id && step.step_id.step_id == step_id) return true;
  }
  return false;
}

// How long node `node_id` of the step waits before it asks: node 0 at once, node i i * 50 ms
// later, at most 30 s. When every node refuses (a setting wrong everywhere), the step is gone
// after the first cancels (or its tasks' own ends), and the later nodes find it gone instead of
// each making slurmctld signal every node again.
std::chrono::milliseconds stagger(std::uint32_t node_id) {
  constexpr std::uint32_t kStepMs = 50;
  constexpr std::uint32_t kMaxMs = 30'000;
  return std::chrono::milliseconds(node_id >= kMaxMs / kStepMs ? kMaxMs : node_id * kStepMs);
}

// Whether this step spans several components of a het job (srun A : B): the layouts
// init_post_opt fetched say so, or, when that failed, a step task list longer than this
// component's. Only a hint: the job the request names comes from slurmctld (het_leader).
bool spans_components(spank_t sp) {
  if (state().het) return true;
  try {
    const auto nodelist = get_env(sp, "SLURM_STEP_NODELIST");
    const auto tasks_per_node = get_env(sp, "SLURM_STEP_TASKS_PER_NODE");
    if (!nodelist || !tasks_per_node) return false;
    const auto hosts = core::expand_hostlist(*nodelist, core::kMaxNodes);
    std::uint64_t tasks = 0;
    for (const auto count :
         core::parse_tasks_per_node(*tasks_per_node, static_cast<std::uint32_t>(hosts.size()))) {
      tasks += count;
    }
    return tasks > get_u32(sp, S_JOB_TOTAL_TASK_COUNT, "S_JOB_TOTAL_TASK_COUNT");
  } catch (const Error&) {
    return false;  // lists that do not parse name no other component
  }
}

// Component 0's job id of the het job whose component `own_job` is, as slurmctld records it
// (het_job_id), or `own_job` when slurmctld names none or cannot be asked. Never from the step's
// environment, which the user's launcher writes: the request below runs as root, and slurmctld
// would cancel any job's step for it.
std::uint32_t het_leader(std::uint32_t own_job) {
  const JobInfo info = load_job_info(own_job);
  const slurm_job_info_t* job = find_job(info, own_job);
  if (job != nullptr && job->het_job_id != 0 && job->het_job_id != NO_VAL) return job->het_job_id;
  return own_job;
}

// The job id that names the whole step to slurmctld: its own, or for a het step component 0's.
// A het step is one step id in every component job: named by component 0's job, slurmctld
// signals it in each of them (job_mgr.c, kill_job_step; since upstream commit 4d70133431, first
// in 25.11, it cancels each component job as a whole instead, as it then also does for srun's
// own abort of a het step).
std::uint32_t job_naming_the_step(spank_t sp) {
  const std::uint32_t own = get_u32(sp, S_JOB_ID, "S_JOB_ID");
  return spans_components(sp) ? het_leader(own) : own;
}

}  // namespace

void end_refused_step(spank_t sp) noexcept {
  try {
    PluginState& st = state();
    if (st.step_cancel_sent) return;
    st.step_cancel_sent = true;
    const std::uint32_t job_id = job_naming_the_step(sp);
    const std::uint32_t step_id = get_u32(sp, S_JOB_STEPID, "S_JOB_STEPID");
    const std::string step = std::to_string(job_id) + "." + std::to_string(step_id);
    // After the reason (user_init said it on this stderr), before Slurm's CANCELLED lines.
    log_error("step " + step +
              " ends on every node, since this node refused it (the reason is above)");
    // Once every task has ended and one of them by a signal, srun stops reading output
    // (step_launch.c, client_io_handler_abort): the cancel must not overtake these lines on
    // their way through slurmstepd's I/O thread.
    std::this_thread::sleep_for(kMessageDrainTime);
    const std::uint32_t node_id = get_u32(sp, S_JOB_NODEID, "S_JOB_NODEID");
    if (node_id > 0 && !st.het) {
      std::this_thread::sleep_for(stagger(node_id));
      if (!step_still_held(job_id, step_id)) {
        log_verbose("step " + step + " has already ended; no cancel needed");
        return;
      }
    }
    if (cancel_step(job_id, step_id) != 0) {
      const int err = errno;
      log_error("could not cancel step " + step + " (" + slurm_strerror(err) +
                "): the other nodes' tasks may run the program and wait for this node's ranks. "
                "Fix: scancel " +
                step);
      return;
    }
    log_verbose("slurmctld cancels step " + step + ", which this node refused");
  } catch (const std::exception& e) {
    slurm_error("dtrain: could not cancel the step this node refused: %s", e.what());
  } catch (...) {
    slurm_error("dtrain: could not cancel the step this node refused");
  }
}

}  // namespace dtrain::spank
