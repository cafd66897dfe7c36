// SPDX-License-Identifier: Apache-2.0
#pragma once
// The plugin's process-wide state. slurmstepd forks each task after user_init, so what
// user_init stores here is what every task_init of this node sees.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/config.hpp"
#include "core/het_step.hpp"
#include "core/node_environment.hpp"
#include "core/step_plan.hpp"

namespace dtrain::spank {

struct NodeTaskPlan {
  std::uint32_t global_rank = 0;
  std::vector<unsigned> cpus;  // planned CPU list (may name CPUs this host lacks)
};

struct PluginState {
  core::PluginConfig config;
  bool option_given = false;
  core::FrameworkSet option_frameworks;
  std::optional<core::GpuView> option_gpu_view;  // --distributed-train-gpu-view

  // Filled by init_post_opt in slurmstepd, as root, for -m arbitrary and het steps only.
  std::string arbitrary_hosts;        // the host of every rank in rank order, from slurmctld
  std::optional<core::HetWorld> het;  // a heterogeneous step: all components together
  std::string controller_error;       // why slurmctld did not give them

  // Set by init_post_opt when it added the task variables to PYXIS_CONTAINER_ENV; task_init
  // puts the user's value back (or none) before the program starts.
  bool container_env_added = false;
  std::optional<std::string> container_env_of_user;

  // Filled by user_init on each node.
  bool active = false;
  std::string planning_error;  // logged by user_init; task_init then stops every task
  // Set by task_exit (as root) once it asked slurmctld to cancel the step this node refused.
  bool step_cancel_sent = false;
  std::vector<NodeTaskPlan> tasks;  // index: local task id
  // What each task builds its own variables from, in its task_init (core::task_environment).
  std::optional<core::StepPlan> plan;
  core::NodeBindingEnv binding_env;
  std::vector<std::string> step_warnings;  // reported once per step (by global rank 0)
  std::vector<std::string> node_warnings;  // reported once per node (by local task 0)
  // The user's own values of the variables a user may set (EnvVar::keep_user_value), as the job
  // had them before any task started: a plugin that runs before dtrain's task_init (pyxis, when
  // it loads first) may put a container's values there, which are not the user's.
  std::map<std::string, std::string> user_values;

  // node_check=on: the fault hint pipe's ends (spank/slurmstepd_root_fault_hint.hpp), -1 when
  // closed.
  int fault_hint_read_fd = -1;
  int fault_hint_write_fd = -1;

  // How a task that cannot get its variables ends before exec; nullptr means _exit. The unit
  // tests record the call instead.
  void (*end_task)(int status) = nullptr;
};

PluginState& state();

}  // namespace dtrain::spank
