// SPDX-License-Identifier: Apache-2.0
// SPANK entry points: the dispatcher. Each callback hands its context to the file named after
// it (srun_options: srun, sbatch, salloc; slurmd_topology_cache: slurmd as root;
// slurmd_epilog_node_check: a job's epilog, as root;
// slurmstepd_user: slurmstepd as the job's user; slurmstepd_root_cancel: slurmstepd as root when
// a task ends; slurmstepd_root_fault_hint: the fault hint's pipe, read as root when the step
// ends) and guarantees that no C++ exception crosses into Slurm: errors are
// caught, logged with "dtrain:" and returned.

#include <slurm/slurm.h>
#include <unistd.h>
#include "spank/spank_api.hpp"

#include <string>
#include <vector>

#include "core/config.hpp"
#include "core/error.hpp"
#include "core/fault_hint.hpp"
#include "spank/slurmd_epilog_node_check.hpp"
#include "spank/slurmd_topology_cache.hpp"
#include "spank/slurmstepd_containers.hpp"
#include "spank/slurmstepd_controller.hpp"
#include "spank/slurmstepd_root_cancel.hpp"
#include "spank/slurmstepd_root_fault_hint.hpp"
#include "spank/slurmstepd_user.hpp"
#include "spank/spank_io.hpp"
#include "spank/srun_options.hpp"
#include "spank/state.hpp"

extern "C" {
extern const char plugin_name[] = "dtrain";
extern const char plugin_type[] = "spank";
extern const unsigned int plugin_version = SLURM_VERSION_NUMBER;
}

namespace dtrain::spank {

PluginState& state() {
  static PluginState instance;
  return instance;
}

namespace {

template <typename Fn>
int guarded(const char* callback, Fn&& fn) noexcept {
  try {
    return fn();
  } catch (const std::exception& e) {
    log_error(std::string(callback) + ": " + e.what());
  } catch (...) {
    log_error(std::string(callback) + ": unexpected error");
  }
  return -1;
}

// slurmd must never fail because of dtrain: every problem here is logged and ignored, and
// steps then discover the topology themselves.
int cache_topology_in_slurmd(int ac, char** av) noexcept {
  try {
    write_topology_cache(
        dtrain::core::parse_plugin_args(std::vector<std::string>(av, av + (ac > 0 ? ac : 0))));
  } catch (const std::exception& e) {
    log_error(std::string("slurmd: no topology cache: ") + e.what());
  }
  return 0;
}

bool is_job_step(spank_t sp) {
  const std::uint32_t step = get_u32(sp, S_JOB_STEPID, "S_JOB_STEPID");
  return step < SLURM_MAX_NORMAL_STEP_ID;  // not the batch script or the extern step
}

}  // namespace
}  // namespace dtrain::spank

using namespace dtrain::spank;

extern "C" int slurm_spank_init(spank_t sp, int ac, char** av) {
  return guarded("init", [&] {
    const spank_context_t ctx = spank_context();
    if (ctx == S_CTX_SLURMD) return cache_topology_in_slurmd(ac, av);
    if (ctx != S_CTX_LOCAL && ctx != S_CTX_REMOTE && ctx != S_CTX_ALLOCATOR) return 0;
    std::vector<std::string> args(av, av + (ac > 0 ? ac : 0));
    try {
      state().config = dtrain::core::parse_plugin_args(args);
    } catch (const dtrain::Error& e) {
      log_error(std::string("bad plugstack.conf arguments: ") + e.what());
      return -1;
    }
    return register_options(sp);
  });
}

// slurmstepd, as root, after the step's options arrived: the last point where slurmctld may be
// asked (why: slurmstepd_controller.hpp).
extern "C" int slurm_spank_init_post_opt(spank_t sp, int /*ac*/, char** /*av*/) {
  return guarded("init_post_opt", [&] {
    if (spank_context() != S_CTX_REMOTE) return 0;
    const PluginState& st = state();
    if ((st.option_given || st.config.enabled_by_default) && is_job_step(sp)) {
      fetch_step_hosts(sp);
      try {
        keep_task_variables_in_containers(sp);
      } catch (const dtrain::Error& e) {
        log_error(std::string("containers started by pyxis may give every task of a node its "
                              "first task's variables: ") +
                  e.what());
      }
    }
    return 0;
  });
}

extern "C" int slurm_spank_user_init(spank_t sp, int /*ac*/, char** /*av*/) {
  return guarded("user_init", [&] {
    PluginState& st = state();
    st.active = (st.option_given || st.config.enabled_by_default) && is_job_step(sp);
    if (!st.active) return 0;
    try {
      plan_node(sp);
    } catch (const std::exception& e) {
      // Said once per node, here: slurmstepd's stderr is the node's first task's stderr. Each
      // task then stops in task_init, since under `optional` a -1 here would start them, and
      // task_exit then cancels the step, whose other nodes would otherwise run the program.
      st.planning_error = e.what();
      log_error(st.planning_error);
    }
    if (st.config.node_check && st.planning_error.empty()) {
      try {
        open_fault_hint_pipe();
      } catch (const dtrain::Error& e) {
        log_error(std::string("the step's tasks get no ") + dtrain::core::kFaultHintFdVariable +
                  ": " + e.what());
      }
    }
    return 0;
  });
}

// slurmstepd, as root, as each task ends: a node whose user_init refused a step that asked for
// --distributed-train (its tasks end in task_init, before exec) ends it on every node (why here:
// slurmstepd_root_cancel.hpp). Under enable=always without the option, plugstack.conf's
// optional or required decides whether such tasks run, and the step is left alone.
extern "C" int slurm_spank_task_exit(spank_t sp, int /*ac*/, char** /*av*/) {
  return guarded("task_exit", [&] {
    const PluginState& st = state();
    if (spank_context() == S_CTX_REMOTE && st.active && st.option_given &&
        !st.planning_error.empty()) {
      end_refused_step(sp);
    }
    return 0;
  });
}

extern "C" int slurm_spank_task_init(spank_t sp, int /*ac*/, char** /*av*/) {
  const int rc = guarded("task_init", [&] {
    if (!state().active) return 0;
    const int applied = apply_to_task(sp);
    if (applied == 0) export_fault_hint_fd(sp);
    return applied;
  });
  if (rc != 0 && state().option_given) {
    // Under `optional` Slurm turns this -1 into success and starts the program without dtrain's
    // variables, or with an outer launcher's RANK. The user asked for them: the task ends here,
    // in its own process before exec, with the reason on its stderr, under either plugstack line.
    error_task(
        "the task stops before its program starts: srun --distributed-train could not "
        "give it correct variables (the reason is above)");
    (state().end_task != nullptr ? state().end_task : &_exit)(1);
  }
  return rc;
}

// slurmstepd, as root, once the step's tasks ended: what they wrote to the fault hint pipe goes
// to a root-only file for the job's epilog (node_check=on only).
extern "C" int slurm_spank_exit(spank_t sp, int /*ac*/, char** /*av*/) {
  return guarded("exit", [&] {
    if (spank_context() != S_CTX_REMOTE) return 0;
    try {
      keep_fault_hints(sp);
    } catch (const dtrain::Error& e) {
      log_error(std::string("fault hint not kept for the epilog: ") + e.what());
    }
    return 0;
  });
}

// The epilog of every job (slurmd runs it once a plugin defines it); with node_check=off it does
// nothing.
extern "C" int slurm_spank_job_epilog(spank_t /*sp*/, int ac, char** av) {
  return run_epilog_node_check(ac, av);
}
