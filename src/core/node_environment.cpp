#include "core/node_environment.hpp"

#include <algorithm>
#include <map>

#include "core/error.hpp"

namespace dtrain::core {
namespace {

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
    env.push_back({"PADDLE_DISTRI_BACKEND", "gloo", true});
    return;
  }
  if (binding.tasks.empty() || binding.gpus_left_as_named) return;
  // FLAGS_selected_gpus indexes the devices the task sees.
  std::string selected;
  for (std::size_t i = 0; i < binding.tasks[local].gpu_count; ++i) {
    if (i != 0) selected += ',';
    selected += std::to_string(i);
  }
  env.push_back({"FLAGS_selected_gpus", selected, true});
}

void move_oversized_to_memory_files(NodeEnvironment& out) {
  std::vector<std::string> moved;
  for (auto& task : out.tasks) {
    for (auto& var : task) {
      if (!exceeds_exec_limit(var)) continue;
      if (std::find(moved.begin(), moved.end(), var.name) == moved.end()) moved.push_back(var.name);
      var.name += "_FILE";
      var.value_in_memory_file = true;
    }
  }
  if (moved.empty()) return;
  std::string list;
  for (const auto& name : moved) {
    if (!list.empty()) list += ", ";
    list += name;
  }
  out.spill_warning = list + " exceed Linux's " + std::to_string(kMaxEnvStringBytes) +
                      "-byte limit for one environment string; exported NAME_FILE instead, the "
                      "path of a memory file each task holds (/proc/<pid>/fd/<n>, readable while "
                      "the task runs; nothing is written to disk)";
}

}  // namespace

NodeEnvironment node_environment(const StepPlan& plan, std::uint32_t node,
                                 const NodeBindingEnv& binding) {
  if (node >= plan.layout.node_count()) {
    throw Error(ErrorKind::kInvalidInput, "node " + std::to_string(node) +
                                              " is outside the step's " +
                                              std::to_string(plan.layout.node_count()) + " nodes");
  }
  const auto& ranks = plan.layout.node_ranks[node];
  NodeEnvironment out;
  out.tasks.reserve(ranks.size());
  for (std::size_t local = 0; local < ranks.size(); ++local) {
    auto env = rank_environment(plan, ranks[local]);
    if (local < binding.tasks.size()) {
      const auto& bound = binding.tasks[local].env;
      env.insert(env.end(), bound.begin(), bound.end());
    }
    if (plan.frameworks.paddle) add_paddle_device_rules(env, binding, local);
    out.tasks.push_back(std::move(env));
  }
  move_oversized_to_memory_files(out);
  return out;
}

}  // namespace dtrain::core
