#include "spank/slurmstepd_root_cancel.hpp"

#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <string>
#include <thread>

#include "core/error.hpp"
#include "core/hostlist.hpp"
#include "core/layout.hpp"
#include "core/parse.hpp"
#include "spank/spank_io.hpp"
#include "spank/state.hpp"

namespace dtrain::spank {
namespace {

constexpr std::chrono::milliseconds kMessageDrainTime{250};

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

// The job id that names the whole step to slurmctld. A het step is one step id in every
// component job: named by component 0's job, slurmctld signals it in each of them (job_mgr.c,
// kill_job_step; since upstream commit 4d70133431, first in 25.11, it cancels each component job
// as a whole instead, as it then also does for srun's own abort of a het step). Component 0's
// job comes from the layouts init_post_opt fetched, or, when that failed, from the environment
// of a step whose task list is longer than this component's (srun A : B in a het job).
std::uint32_t job_naming_the_step(spank_t sp) {
  const PluginState& st = state();
  if (st.het) return st.het->leader_job_id;
  const std::uint32_t own = get_u32(sp, S_JOB_ID, "S_JOB_ID");
  try {
    auto leader = get_env(sp, "SLURM_JOB_ID_HET_GROUP_0");
    if (!leader) leader = get_env(sp, "SLURM_JOB_ID_PACK_GROUP_0");
    const auto nodelist = get_env(sp, "SLURM_STEP_NODELIST");
    const auto tasks_per_node = get_env(sp, "SLURM_STEP_TASKS_PER_NODE");
    if (!leader || !nodelist || !tasks_per_node) return own;
    const auto hosts = core::expand_hostlist(*nodelist, core::kMaxNodes);
    std::uint64_t tasks = 0;
    for (const auto count :
         core::parse_tasks_per_node(*tasks_per_node, static_cast<std::uint32_t>(hosts.size()))) {
      tasks += count;
    }
    if (tasks <= get_u32(sp, S_JOB_TOTAL_TASK_COUNT, "S_JOB_TOTAL_TASK_COUNT")) return own;
    return static_cast<std::uint32_t>(
        core::parse_unsigned(*leader, "SLURM_JOB_ID_HET_GROUP_0", 1, 0xFFFFFFFEu));
  } catch (const Error&) {
    return own;  // lists that do not parse name no other component
  }
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
