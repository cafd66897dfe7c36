#pragma once
// The plugin's link to topology binding and to slurmctld for arbitrary layouts.

#include "spank/spank_api.hpp"

#include <cstdint>
#include <string>
#include <vector>

#include "core/config.hpp"
#include "core/step_plan.hpp"

namespace dtrain::spank {

struct NodeBinding {
  std::vector<std::vector<core::EnvVar>> env;  // index: local task id
  std::vector<std::vector<unsigned>> cpus;     // index: local task id
  std::vector<std::string> warnings;
};

// Loads the node's topology once (site XML or live) and plans every local task's binding.
// Never fails the step: a topology problem becomes a warning and CPU-only or no binding.
NodeBinding plan_node_binding(spank_t sp, const core::PluginConfig& config,
                              const core::StepPlan& plan, std::uint32_t local_tasks);

// In slurmd, as root, once at start: writes the live topology to topology_cache= so that
// steps load a file instead of discovering the machine again. Throws dtrain::Error.
void write_topology_cache(const core::PluginConfig& config);

// Restricts the calling task to planned ∩ allowed CPUs (left as it is when that is empty).
void apply_task_affinity(const std::vector<unsigned>& planned);

// One warning naming the local tasks none of whose planned CPUs this step may use (a site
// XML describing CPUs this node lacks); empty when every task can be bound.
std::string unavailable_cpu_warning(const NodeBinding& binding);

// The host of every rank in order, asked once from slurmctld (arbitrary distribution only).
std::string arbitrary_hosts_from_controller(std::uint32_t job_id, std::uint32_t step_id);

}  // namespace dtrain::spank
