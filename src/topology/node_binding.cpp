// SPDX-License-Identifier: Apache-2.0
#include "topology/node_binding.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "topology/allowed_cpus.hpp"
#include "topology/binding.hpp"
#include "topology/environment.hpp"

namespace dtrain::topology {
namespace {

// Slurm's gres sets SLURM_STEP_GPUS (node GPU indices in PCI order) and CUDA_VISIBLE_DEVICES for
// a step that holds GPUs. When the cgroup hides the other GPUs, CUDA_VISIBLE_DEVICES is
// renumbered from 0 and differs. A step without GPUs in a GPU job (srun --gres=none) gets
// neither, only the job's SLURM_JOB_GPUS: it holds no GPU, and binding the job's GPUs would hand
// it devices another step owns. Without gres, a CUDA_VISIBLE_DEVICES the user set limits the
// GPUs the binding may use. A value that names devices by UUID or MIG instance (gres.conf with
// unique ids, NVML autodetection) cannot be matched to the topology's GPUs: it is kept as it is
// and only CPUs are bound.
// Returns whether Slurm, not the user, set CUDA_VISIBLE_DEVICES.
bool apply_gpu_limits(const StepGpuVariables& gpus, BindingRequest& request,
                      std::vector<std::string>& notes) {
  const auto& visible = gpus.cuda_visible_devices;
  const auto no_gpus = [&](std::string why) {
    request.allowed_gpu_indices = std::vector<unsigned>{};
    notes.push_back(std::move(why));
  };
  std::optional<std::vector<unsigned>> visible_indices;
  if (visible) {
    try {
      visible_indices = parse_gpu_index_list(*visible, "CUDA_VISIBLE_DEVICES");
    } catch (const Error&) {
      // UUIDs or MIG names: not indices into the topology's GPUs.
    }
  }
  const bool visible_by_name = visible && !visible_indices;
  if (gpus.step_gpus) {
    if (visible_by_name) {
      no_gpus("CUDA_VISIBLE_DEVICES=" + *visible +
              " names GPUs by UUID or MIG instance, which the topology cannot match; kept as "
              "Slurm set it, no GPU or NIC binding, CPU binding only");
      return true;
    }
    request.allowed_gpu_indices = parse_gpu_index_list(*gpus.step_gpus, "SLURM_STEP_GPUS");
    request.numbering = (visible && *visible == *gpus.step_gpus) ? GpuNumbering::kWholeNode
                                                                 : GpuNumbering::kAllowedOnly;
    return visible.has_value();
  }
  if (gpus.job_gpus) {
    no_gpus("the job has GPUs (SLURM_JOB_GPUS=" + *gpus.job_gpus +
            ") but this step holds none (no SLURM_STEP_GPUS); no GPU or NIC binding, CPU "
            "binding only");
    return false;
  }
  if (gpus.slurm_only) {
    no_gpus(
        "gpus=slurm and Slurm gave this step no GPUs (no SLURM_STEP_GPUS); no GPU or NIC "
        "binding, CPU binding only");
    return false;
  }
  if (!visible) return false;
  request.numbering = GpuNumbering::kWholeNode;
  if (visible_by_name) {
    no_gpus("CUDA_VISIBLE_DEVICES=" + *visible +
            " does not name GPUs by index; kept, no GPU or NIC binding, CPU binding only");
    return false;
  }
  request.allowed_gpu_indices = std::move(visible_indices);
  return false;
}

}  // namespace

NodeBinding bind_node(const NodeTopology& whole_node, unsigned local_tasks,
                      const StepGpuVariables& gpus, const std::optional<CpuList>& step_cpus) {
  const NodeTopology topology = step_cpus ? restrict_to_cpus(whole_node, *step_cpus) : whole_node;
  NodeBinding out;
  out.env.visible_devices_set = gpus.cuda_visible_devices.has_value();
  if (local_tasks == 0) return out;
  BindingRequest request;
  request.local_tasks = local_tasks;
  request.node_view = gpus.node_view;
  const bool slurm_set_visible_devices = apply_gpu_limits(gpus, request, out.notes);
  // A CUDA_VISIBLE_DEVICES the user set is kept as it is, so the tasks see the GPUs it lists, in
  // its order, and their devices are their GPUs' positions there.
  std::optional<std::vector<unsigned>> kept_user_list;
  if (gpus.cuda_visible_devices && !slurm_set_visible_devices) {
    try {
      kept_user_list = parse_gpu_index_list(*gpus.cuda_visible_devices, "CUDA_VISIBLE_DEVICES");
    } catch (const Error&) {
    }
  }
  // The step holds GPUs that the topology cannot name; it has none when nothing names any.
  out.env.gpus_left_as_named = request.allowed_gpu_indices &&
                               request.allowed_gpu_indices->empty() &&
                               gpus.cuda_visible_devices.has_value();
  const auto plan = plan_binding(topology, request);
  out.warnings.insert(out.warnings.end(), plan.warnings.begin(), plan.warnings.end());
  for (auto task : plan.tasks) {
    if (kept_user_list && !task.gpu_numbers.empty()) {
      task.device_indices.clear();
      for (const unsigned number : task.gpu_numbers) {
        const auto at = std::find(kept_user_list->begin(), kept_user_list->end(), number);
        task.device_indices.push_back(static_cast<unsigned>(at - kept_user_list->begin()));
      }
    }
    core::TaskBindingEnv bound;
    bound.gpu_count = task.gpu_bus_ids.size();
    bound.device_indices = task.device_indices;
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
