#include "topology/node_binding.hpp"

#include "core/error.hpp"
#include "topology/binding.hpp"
#include "topology/environment.hpp"

namespace dtrain::topology {
namespace {

// Slurm's gres sets SLURM_STEP_GPUS (node GPU indices in PCI order) and CUDA_VISIBLE_DEVICES.
// When the cgroup hides the other GPUs, CUDA_VISIBLE_DEVICES is renumbered from 0 and differs.
// Without gres, a CUDA_VISIBLE_DEVICES the user set limits the GPUs the binding may use;
// one that names devices by UUID or MIG instance cannot be matched, so no GPU is bound.
// Returns whether Slurm, not the user, set CUDA_VISIBLE_DEVICES.
bool apply_gpu_limits(const StepGpuVariables& gpus, BindingRequest& request,
                      std::vector<std::string>& warnings) {
  const auto& slurm_gpus = gpus.step_gpus ? gpus.step_gpus : gpus.job_gpus;
  const auto& visible = gpus.cuda_visible_devices;
  if (slurm_gpus && !slurm_gpus->empty()) {
    request.allowed_gpu_indices = parse_gpu_index_list(*slurm_gpus, "SLURM_STEP_GPUS");
    request.numbering = (visible && *visible == *slurm_gpus) ? GpuNumbering::kWholeNode
                                                             : GpuNumbering::kAllowedOnly;
    return visible.has_value();
  }
  if (!visible) return false;
  request.numbering = GpuNumbering::kWholeNode;
  try {
    request.allowed_gpu_indices = parse_gpu_index_list(*visible, "CUDA_VISIBLE_DEVICES");
  } catch (const Error&) {
    request.allowed_gpu_indices = std::vector<unsigned>{};
    warnings.push_back("CUDA_VISIBLE_DEVICES=" + *visible +
                       " does not name GPUs by index; no GPU or NIC binding, CPU binding only");
  }
  return false;
}

}  // namespace

NodeBinding bind_node(const NodeTopology& topology, unsigned local_tasks,
                      const StepGpuVariables& gpus) {
  NodeBinding out;
  out.env.visible_devices_set = gpus.cuda_visible_devices.has_value();
  if (local_tasks == 0) return out;
  BindingRequest request;
  request.local_tasks = local_tasks;
  const bool slurm_set_visible_devices = apply_gpu_limits(gpus, request, out.warnings);
  const auto plan = plan_binding(topology, request);
  out.warnings.insert(out.warnings.end(), plan.warnings.begin(), plan.warnings.end());
  for (const auto& task : plan.tasks) {
    core::TaskBindingEnv bound;
    bound.gpu_count = task.gpu_bus_ids.size();
    for (auto& [name, value] : binding_environment(task)) {
      // Slurm's own CUDA_VISIBLE_DEVICES is replaced by the task's share; a user's is kept.
      const bool from_slurm = name == "CUDA_VISIBLE_DEVICES" && slurm_set_visible_devices;
      bound.env.push_back({name, value, !from_slurm});
    }
    out.env.tasks.push_back(std::move(bound));
    out.cpus.push_back(task.cpus);
  }
  return out;
}

core::NodeBindingEnv unbound_node(const StepGpuVariables& gpus) {
  return {{}, gpus.cuda_visible_devices.has_value()};
}

}  // namespace dtrain::topology
