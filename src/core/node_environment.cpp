// SPDX-License-Identifier: Apache-2.0
#include "core/node_environment.hpp"

#include <algorithm>
#include <set>

#include "core/error.hpp"
#include "core/memory_file.hpp"

namespace dtrain::core {
namespace {

constexpr const char* kPaddleBackend = "PADDLE_DISTRI_BACKEND";
constexpr const char* kPaddleSelectedGpus = "FLAGS_selected_gpus";

constexpr const char* kJaxLocalDeviceIds = "JAX_LOCAL_DEVICE_IDS";
constexpr const char* kTorchrunProcsPerNode = "PET_NPROC_PER_NODE";

std::string device_list(const TaskBindingEnv& task) {
  std::string list;
  for (std::size_t i = 0; i < task.device_indices.size(); ++i) {
    if (i != 0) list += ',';
    list += std::to_string(task.device_indices[i]);
  }
  return list;
}

bool has_gpu(const NodeBindingEnv& binding, std::size_t local) {
  if (binding.tasks.empty() || binding.gpus_left_as_named) return binding.visible_devices_set;
  return local < binding.tasks.size() && binding.tasks[local].gpu_count > 0;
}

// Paddle's own launcher sets these from the devices it hands a worker.
void add_paddle_device_rules(std::vector<EnvVar>& env, const NodeBindingEnv& binding,
                             std::size_t local) {
  if (!has_gpu(binding, local)) {
    // On CPU Paddle's default backend ("auto") builds no global group; its launcher sets gloo
    // for device-less workers.
    env.push_back({kPaddleBackend, "gloo", true});
    return;
  }
  if (binding.tasks.empty() || binding.gpus_left_as_named) return;
  // FLAGS_selected_gpus indexes the devices the task sees.
  env.push_back({kPaddleSelectedGpus, device_list(binding.tasks[local]), true});
}

// JAX restricts a process to JAX_LOCAL_DEVICE_IDS (jax/_src/distributed.py); without it, its
// Slurm detection takes [SLURM_LOCALID] (jax/_src/clusters/cluster.py), which names another
// task's GPU, or none, when a task sees its own GPU only.
void add_jax_device_rules(std::vector<EnvVar>& env, const NodeBindingEnv& binding,
                          std::size_t local) {
  if (local >= binding.tasks.size() || binding.gpus_left_as_named) return;
  if (binding.tasks[local].device_indices.empty()) return;
  env.push_back({kJaxLocalDeviceIds, device_list(binding.tasks[local]), true});
}

// torchrun, started once per node, reads PET_NPROC_PER_NODE as --nproc-per-node's default
// (torch/distributed/argparse_util.py env()): one worker per GPU the task holds.
void add_torchrun_device_rules(std::vector<EnvVar>& env, const StepPlan& plan,
                               const NodeBindingEnv& binding, std::size_t local) {
  if (!one_task_per_node(plan) || local >= binding.tasks.size() || binding.gpus_left_as_named) {
    return;
  }
  const std::size_t gpus = binding.tasks[local].gpu_count;
  if (gpus > 0) env.push_back({kTorchrunProcsPerNode, std::to_string(gpus), true});
}

bool has_var(const std::vector<EnvVar>& task, const std::string& name) {
  return std::any_of(task.begin(), task.end(), [&](const EnvVar& var) { return var.name == name; });
}

// NAME becomes NAME_FILE, and NAME_HASH is added unless the task has it already
// (DTRAIN_ENDPOINTS_HASH). Each name moved is added to `moved` once, in order of first appearance.
void move_oversized_to_memory_files(std::vector<EnvVar>& task, std::vector<std::string>& moved) {
  std::vector<EnvVar> hashes;
  for (auto& var : task) {
    if (!exceeds_exec_limit(var)) continue;
    if (std::find(moved.begin(), moved.end(), var.name) == moved.end()) moved.push_back(var.name);
    if (!has_var(task, var.name + "_HASH")) {
      hashes.push_back({var.name + "_HASH", value_hash(var.value)});
    }
    var.name += "_FILE";
    var.value_in_memory_file = true;
  }
  task.insert(task.end(), hashes.begin(), hashes.end());
}

// What the task must not keep from the environment it inherited (a batch script's, an outer
// step's): NAME beside this step's NAME_FILE, and any NAME_FILE or NAME_HASH that this step did
// not set, since readers prefer the memory file.
std::vector<std::string> inherited_names_to_remove(const std::vector<EnvVar>& task) {
  std::vector<std::string> names;
  for (const auto& var : task) {
    if (var.value_in_memory_file) names.push_back(var.name.substr(0, var.name.size() - 5));
  }
  for (const auto value : memory_file_value_names()) {
    for (const char* form : {"_FILE", "_HASH"}) {
      const std::string name = std::string(value) + form;
      if (!has_var(task, name)) names.push_back(name);
    }
  }
  return names;
}

std::string spill_warning(const std::vector<std::string>& moved) {
  std::string list;
  for (const auto& name : moved) {
    if (!list.empty()) list += ", ";
    list += name;
  }
  return list + " exceed Linux's " + std::to_string(kMaxEnvStringBytes) +
         "-byte limit for one environment string; exported NAME_FILE instead (/proc/self/fd/N, "
         "a sealed memory file each task holds and the processes it starts inherit; nothing is "
         "written to disk) with NAME_HASH. TensorFlow and PaddlePaddle read only NAME: call "
         "dtrain_env.load() first (spank_dtrain(8), MEMORY FILES)";
}

void check_node(const StepPlan& plan, std::uint32_t node) {
  if (node >= plan.layout.node_count()) {
    throw Error(ErrorKind::kInvalidInput, "node " + std::to_string(node) +
                                              " is outside the step's " +
                                              std::to_string(plan.layout.node_count()) + " nodes");
  }
}

std::vector<EnvVar> unchecked_task_environment(const StepPlan& plan, std::uint32_t node,
                                               std::uint32_t local, const NodeBindingEnv& binding,
                                               std::vector<std::string>& moved) {
  auto env = rank_environment(plan, plan.layout.node_ranks[node][local]);
  if (local < binding.tasks.size()) {
    const auto& bound = binding.tasks[local].env;
    env.insert(env.end(), bound.begin(), bound.end());
  }
  if (plan.frameworks.paddle) add_paddle_device_rules(env, binding, local);
  if (plan.frameworks.jax) add_jax_device_rules(env, binding, local);
  if (plan.frameworks.torch) add_torchrun_device_rules(env, plan, binding, local);
  move_oversized_to_memory_files(env, moved);
  return env;
}

}  // namespace

TaskEnvironment task_environment(const StepPlan& plan, std::uint32_t node, std::uint32_t local,
                                 const NodeBindingEnv& binding) {
  check_node(plan, node);
  if (local >= plan.layout.local_world_size(node)) {
    throw Error(ErrorKind::kInvalidInput,
                "local task " + std::to_string(local) + " is outside node " + std::to_string(node) +
                    "'s " + std::to_string(plan.layout.local_world_size(node)) + " tasks");
  }
  std::vector<std::string> moved;
  TaskEnvironment out;
  out.vars = unchecked_task_environment(plan, node, local, binding, moved);
  out.remove = inherited_names_to_remove(out.vars);
  if (!moved.empty()) out.spill_warning = spill_warning(moved);
  return out;
}

std::vector<std::string> user_settable_names(const StepPlan& plan, const NodeBindingEnv& binding) {
  std::set<std::string> names;
  for (const auto& task : binding.tasks) {
    for (const auto& var : task.env) {
      if (var.keep_user_value) names.insert(var.name);
    }
  }
  if (plan.frameworks.paddle) names.insert({kPaddleBackend, kPaddleSelectedGpus});
  if (plan.frameworks.jax) names.insert(kJaxLocalDeviceIds);
  if (plan.frameworks.torch && one_task_per_node(plan)) names.insert(kTorchrunProcsPerNode);
  return {names.begin(), names.end()};
}

NodeEnvironment node_environment(const StepPlan& plan, std::uint32_t node,
                                 const NodeBindingEnv& binding) {
  check_node(plan, node);
  const auto local_count = plan.layout.local_world_size(node);
  NodeEnvironment out;
  out.tasks.reserve(local_count);
  std::vector<std::string> moved;
  for (std::uint32_t local = 0; local < local_count; ++local) {
    out.tasks.push_back(unchecked_task_environment(plan, node, local, binding, moved));
  }
  if (!moved.empty()) out.spill_warning = spill_warning(moved);
  return out;
}

}  // namespace dtrain::core
