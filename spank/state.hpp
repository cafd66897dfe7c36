#pragma once
// The plugin's process-wide state. slurmstepd forks each task after user_init, so what
// user_init stores here is what every task_init of this node sees.

#include <cstdint>
#include <string>
#include <vector>

#include "core/config.hpp"
#include "core/step_plan.hpp"

namespace dtrain::spank {

struct NodeTaskPlan {
  std::uint32_t global_rank = 0;
  std::vector<core::EnvVar> env;
  std::vector<unsigned> cpus;  // planned CPU list (may name CPUs this host lacks)
};

struct PluginState {
  core::PluginConfig config;
  bool option_given = false;
  core::FrameworkSet option_frameworks;

  // Filled by init_post_opt in slurmstepd, as root, for -m arbitrary steps only.
  std::string arbitrary_hosts;        // the host of every rank in rank order, from slurmctld
  std::string arbitrary_hosts_error;  // why slurmctld did not give them

  // Filled by user_init on each node.
  bool active = false;
  std::string planning_error;              // logged by user_init; task_init then stops every task
  std::vector<NodeTaskPlan> tasks;         // index: local task id
  std::vector<std::string> step_warnings;  // reported once per step (by global rank 0)
  std::vector<std::string> node_warnings;  // reported once per node (by local task 0)

  // How a task that cannot get its variables ends before exec; nullptr means _exit. The unit
  // tests record the call instead.
  void (*end_task)(int status) = nullptr;
};

PluginState& state();

}  // namespace dtrain::spank
