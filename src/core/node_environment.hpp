// SPDX-License-Identifier: Apache-2.0
#pragma once
// The exact environment of every task of one node, assembled in one place: the rank-level
// names, the binding, the framework rules that depend on the binding, and which values go to
// memory files because execve would refuse them. The plugin exports exactly this and dtrain-plan
// prints exactly this. Pure.

#include <cstdint>
#include <string>
#include <vector>

#include "core/step_plan.hpp"

namespace dtrain::core {

// One local task's binding as the plugin applies it.
struct TaskBindingEnv {
  std::vector<EnvVar> env;  // CUDA_VISIBLE_DEVICES, NCCL_IB_HCA, OMP_NUM_THREADS, ...
  std::size_t gpu_count = 0;
  // Its own GPUs as CUDA device indices among those it sees (topology::TaskBinding): what
  // DTRAIN_CUDA_DEVICE, FLAGS_selected_gpus and JAX_LOCAL_DEVICE_IDS point at.
  std::vector<unsigned> device_indices;
};

struct NodeBindingEnv {
  std::vector<TaskBindingEnv> tasks;  // index: local rank; empty when nothing was bound
  // Without a binding a task is taken to have a GPU when Slurm or the user set
  // CUDA_VISIBLE_DEVICES.
  bool visible_devices_set = false;
  // GPUs were left as CUDA_VISIBLE_DEVICES names them (UUIDs, MIG): the tasks bound CPUs only,
  // yet have GPUs exactly when CUDA_VISIBLE_DEVICES is set.
  bool gpus_left_as_named = false;
};

struct NodeEnvironment {
  std::vector<std::vector<EnvVar>> tasks;  // index: local rank
  std::string spill_warning;               // said once per step when anything was spilled
};

// A value too long for execve becomes NAME_FILE with value_in_memory_file set (see EnvVar), and
// NAME_HASH, its hash, is added (core/memory_file.hpp).
NodeEnvironment node_environment(const StepPlan& plan, std::uint32_t node,
                                 const NodeBindingEnv& binding);

struct TaskEnvironment {
  std::vector<EnvVar> vars;
  // Names to remove from what the task inherited: NAME where this step exports NAME_FILE (a
  // batch script's TF_CONFIG must not reach TensorFlow beside the step's TF_CONFIG_FILE), and
  // every NAME_FILE and NAME_HASH of memory_file_value_names() that this step does not set.
  std::vector<std::string> remove;
  std::string spill_warning;  // as NodeEnvironment's, for this task's values
};

// One local task's entry of node_environment, built alone: the plugin builds each task's in
// that task's task_init, since in a large step every task carries megabytes of endpoint lists
// that slurmstepd would otherwise build for all of them before any task starts.
TaskEnvironment task_environment(const StepPlan& plan, std::uint32_t node, std::uint32_t local,
                                 const NodeBindingEnv& binding);

// Every name a task of the node may get with keep_user_value set (binding and device rules),
// so that the user's values can be read before any task starts.
std::vector<std::string> user_settable_names(const StepPlan& plan, const NodeBindingEnv& binding);

}  // namespace dtrain::core
