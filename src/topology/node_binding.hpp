// SPDX-License-Identifier: Apache-2.0
#pragma once
// From a node's topology and the step's GPU variables to what each local task is bound to:
// its binding variables (as core::TaskBindingEnv, ready for core::node_environment) and its
// CPUs. The plugin (in slurmstepd) and dtrain-plan both bind through here. Pure.

#include <optional>
#include <string>
#include <vector>

#include "core/node_environment.hpp"
#include "topology/cpu_list.hpp"
#include "topology/node_topology.hpp"

namespace dtrain::topology {

// The step environment's GPU variables, as Slurm (gres) or the user left them.
struct StepGpuVariables {
  std::optional<std::string> step_gpus;             // SLURM_STEP_GPUS
  std::optional<std::string> job_gpus;              // SLURM_JOB_GPUS
  std::optional<std::string> cuda_visible_devices;  // CUDA_VISIBLE_DEVICES
  bool slurm_only = false;  // gpus=slurm: without SLURM_STEP_GPUS the step holds no GPU
  bool node_view = false;   // core::node_gpu_view for this step (BindingRequest::node_view)
};

struct NodeBinding {
  core::NodeBindingEnv env;
  std::vector<CpuList> cpus;  // index: local rank; the plan, which may name CPUs not here
  std::vector<std::string> warnings;
  // Expected situations worth a line at verbose level only, e.g. GPUs named by UUID.
  std::vector<std::string> notes;
};

// Throws dtrain::Error when the GPUs Slurm allowed are not in `topology` or the request is
// inconsistent. GPUs are bound only from SLURM_STEP_GPUS (a step of a GPU job without it holds
// none) or, without Slurm's GPU variables, from all GPUs or a user's CUDA_VISIBLE_DEVICES; a
// CUDA_VISIBLE_DEVICES that names no GPU by index is kept and only CPUs are bound (a note).
// With `step_cpus` (the step's cpuset, when it is smaller than the machine) the shares are cut
// from those CPUs only (restrict_to_cpus).
NodeBinding bind_node(const NodeTopology& topology, unsigned local_tasks,
                      const StepGpuVariables& gpus,
                      const std::optional<CpuList>& step_cpus = std::nullopt);

// No binding at all (bind=off, topology=none, or a topology that could not be read).
core::NodeBindingEnv unbound_node(const StepGpuVariables& gpus);

}  // namespace dtrain::topology
