#include "spank/binding.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "core/error.hpp"
#include "spank/spank_io.hpp"
#include "topology/affinity.hpp"
#include "topology/binding.hpp"
#include "topology/cpu_list.hpp"
#include "topology/environment.hpp"
#include "topology/load.hpp"

namespace dtrain::spank {
namespace {

constexpr const char* kCacheFile = "/topology.xml";

// The cache is written by root and read by every user's step, so it must be a root-owned
// path nobody else can write.
bool root_only(const std::string& path, bool want_directory) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) return false;
  const bool right_type = want_directory ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode);
  return right_type && st.st_uid == 0 && (st.st_mode & (S_IWGRP | S_IWOTH)) == 0;
}

std::string cache_file(const core::PluginConfig& config) {
  if (config.topology_cache == "none") return {};
  return config.topology_cache + kCacheFile;
}

bool binds_live_topology(const core::PluginConfig& config) {
  return config.bind && (config.topology.empty() || config.topology == "live");
}

// Loads the configured topology; a broken site XML falls back to this machine's own
// topology (CPU-only in practice) with a warning, so the step never fails for it.
topology::NodeTopology load_for_step(const core::PluginConfig& config,
                                     std::vector<std::string>& warnings) {
  const bool live = config.topology.empty() || config.topology == "live";
  if (live) {
    const std::string cached = cache_file(config);
    if (!cached.empty() && root_only(config.topology_cache, true) && root_only(cached, false)) {
      try {
        return topology::load_topology(cached);
      } catch (const Error&) {
        // A damaged cache is only a lost shortcut: discover the machine instead.
      }
    }
  } else {
    try {
      return topology::load_topology(config.topology);
    } catch (const Error& e) {
      warnings.push_back(std::string(e.what()) +
                         "; binding from this machine's own topology instead");
    }
  }
  return topology::load_topology("");
}

// Slurm's gres sets SLURM_STEP_GPUS (node GPU indices in PCI order) and CUDA_VISIBLE_DEVICES.
// When the cgroup hides the other GPUs, CUDA_VISIBLE_DEVICES is renumbered from 0 and differs.
// Without gres, a CUDA_VISIBLE_DEVICES the user set limits the GPUs the binding may use;
// one that names devices by UUID or MIG instance cannot be matched, so no GPU is bound.
void apply_gpu_limits(spank_t sp, topology::BindingRequest& request,
                      bool& slurm_set_visible_devices, std::vector<std::string>& warnings) {
  auto gpus = get_env(sp, "SLURM_STEP_GPUS");
  if (!gpus) gpus = get_env(sp, "SLURM_JOB_GPUS");
  const auto visible = get_env(sp, "CUDA_VISIBLE_DEVICES");
  if (gpus && !gpus->empty()) {
    request.allowed_gpu_indices = topology::parse_gpu_index_list(*gpus, "SLURM_STEP_GPUS");
    request.numbering = (visible && *visible == *gpus) ? topology::GpuNumbering::kWholeNode
                                                       : topology::GpuNumbering::kAllowedOnly;
    slurm_set_visible_devices = visible.has_value();
    return;
  }
  if (!visible) return;
  request.numbering = topology::GpuNumbering::kWholeNode;
  try {
    request.allowed_gpu_indices =
        topology::parse_gpu_index_list(*visible, "CUDA_VISIBLE_DEVICES");
  } catch (const Error&) {
    request.allowed_gpu_indices = std::vector<unsigned>{};
    warnings.push_back("CUDA_VISIBLE_DEVICES=" + *visible +
                       " does not name GPUs by index; no GPU or NIC binding, CPU binding only");
  }
}

}  // namespace

NodeBinding plan_node_binding(spank_t sp, const core::PluginConfig& config,
                              const core::StepPlan& plan, std::uint32_t local_tasks) {
  NodeBinding out;
  if (!config.bind || config.topology == "none" || local_tasks == 0) return out;
  try {
    const auto topo = load_for_step(config, out.warnings);
    topology::BindingRequest request;
    request.local_tasks = local_tasks;
    bool slurm_set_visible_devices = false;
    apply_gpu_limits(sp, request, slurm_set_visible_devices, out.warnings);
    const auto binding = topology::plan_binding(topo, request);
    out.warnings.insert(out.warnings.end(), binding.warnings.begin(), binding.warnings.end());
    for (const auto& task : binding.tasks) {
      std::vector<core::EnvVar> env;
      for (auto& [name, value] : topology::binding_environment(task)) {
        const bool from_slurm = name == "CUDA_VISIBLE_DEVICES" && slurm_set_visible_devices;
        env.push_back({name, value, !from_slurm});
      }
      if (plan.frameworks.paddle && !task.gpu_bus_ids.empty()) {
        // Paddle's launcher sets FLAGS_selected_gpus as an index into the visible devices.
        std::string selected;
        for (std::size_t i = 0; i < task.gpu_bus_ids.size(); ++i) {
          if (i != 0) selected += ',';
          selected += std::to_string(i);
        }
        env.push_back({"FLAGS_selected_gpus", selected, true});
      }
      out.env.push_back(std::move(env));
      out.cpus.push_back(task.cpus);
    }
  } catch (const std::exception& e) {
    out.env.clear();
    out.cpus.clear();
    out.warnings.push_back(std::string("no GPU/NIC/CPU binding for this step: ") + e.what());
  }
  return out;
}

void write_topology_cache(const core::PluginConfig& config) {
  if (!binds_live_topology(config) || config.topology_cache == "none") return;
  const std::string& dir = config.topology_cache;
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    throw Error(ErrorKind::kResource, "cannot create topology_cache directory '" + dir +
                                          "': " + std::strerror(errno));
  }
  if (!root_only(dir, true)) {
    throw Error(ErrorKind::kResource, "topology_cache directory '" + dir +
                                          "' is not a directory that only root can write; "
                                          "steps will discover the topology themselves");
  }
  topology::export_live_topology(cache_file(config));
}

void apply_task_affinity(const std::vector<unsigned>& planned) {
  if (planned.empty()) return;
  try {
    topology::apply_cpu_affinity(planned);
  } catch (const std::exception& e) {
    warn_task(std::string("CPU affinity not applied: ") + e.what());
  }
}

std::string unavailable_cpu_warning(const NodeBinding& binding) {
  const auto allowed = topology::current_affinity();
  std::vector<unsigned> starved;
  for (unsigned local = 0; local < binding.cpus.size(); ++local) {
    const auto& planned = binding.cpus[local];
    if (!planned.empty() && topology::intersect_cpus(planned, allowed).empty()) {
      starved.push_back(local);
    }
  }
  if (starved.empty()) return {};
  return "local tasks " + topology::format_cpu_list(starved) +
         ": none of their planned CPUs (DTRAIN_CPU_LIST) is among the CPUs this step may use (" +
         topology::format_cpu_list(allowed) +
         "); CPU affinity left unchanged. Does the topology XML describe this node?";
}

}  // namespace dtrain::spank
