#include "spank/remote.hpp"

#include <slurm/slurm.h>

#include "core/env_spill.hpp"
#include "core/error.hpp"
#include "core/netio.hpp"
#include "spank/binding.hpp"
#include "spank/spank_io.hpp"
#include "spank/state.hpp"

namespace dtrain::spank {
namespace {

std::string required_env(spank_t sp, const char* name) {
  auto value = get_env(sp, name);
  if (!value) {
    throw Error(ErrorKind::kInvalidInput,
                std::string(name) + " is not set in the step environment; is this a job step?");
  }
  return *value;
}

core::StepInputs read_step_inputs(spank_t sp) {
  core::StepInputs in;
  in.job_id = get_u32(sp, S_JOB_ID, "S_JOB_ID");
  in.step_id = get_u32(sp, S_JOB_STEPID, "S_JOB_STEPID");
  in.node_id = get_u32(sp, S_JOB_NODEID, "S_JOB_NODEID");
  in.spec.nnodes = get_u32(sp, S_JOB_NNODES, "S_JOB_NNODES");
  in.spec.ntasks = get_u32(sp, S_JOB_TOTAL_TASK_COUNT, "S_JOB_TOTAL_TASK_COUNT");
  in.spec.nodelist = required_env(sp, "SLURM_STEP_NODELIST");
  in.spec.tasks_per_node = required_env(sp, "SLURM_STEP_TASKS_PER_NODE");
  in.spec.distribution = core::parse_distribution(get_env(sp, "SLURM_DISTRIBUTION").value_or(""),
                                                  get_env(sp, "SLURM_DIST_PLANESIZE").value_or(""));
  in.reserved_ports = get_env(sp, "SLURM_STEP_RESV_PORTS").value_or("");
  const std::uint32_t local_tasks = get_u32(sp, S_JOB_LOCAL_TASK_COUNT, "S_JOB_LOCAL_TASK_COUNT");
  for (std::uint32_t local = 0; local < local_tasks; ++local) {
    if (local) in.local_gtids += ',';
    in.local_gtids += std::to_string(local_to_global(sp, local));
  }
  if (in.spec.distribution.kind == core::DistributionKind::kArbitrary) {
    in.spec.arbitrary_hosts = arbitrary_hosts_from_controller(in.job_id, in.step_id);
  }
  return in;
}

void warn_about_busy_ports(const core::StepPlan& plan, PluginState& st) {
  const auto& addr = plan.node_addresses[plan.node];
  const auto local_count = plan.layout.local_world_size(plan.node);
  for (std::uint32_t local = 0; local < local_count; ++local) {
    const auto port = plan.ports.endpoint_ports[local];
    if (core::port_in_use(addr, port)) {
      st.node_warnings.push_back("port " + std::to_string(port) + " on " +
                                 plan.layout.hosts[plan.node] + " (" + addr +
                                 ") is already in use by another process; local rank " +
                                 std::to_string(local) +
                                 " cannot listen on its endpoint. Fix: stop that process, or "
                                 "configure reserved ports (MpiParams=ports= and srun --resv-ports)");
    }
  }
  if (plan.layout.ranks[0].node == plan.node && core::port_in_use(addr, plan.ports.master)) {
    st.node_warnings.push_back("master port " + std::to_string(plan.ports.master) + " on " +
                               plan.layout.hosts[plan.node] +
                               " is already in use by another process");
  }
}

// Without a binding, a GPU is assumed wherever Slurm or the user set CUDA_VISIBLE_DEVICES.
bool task_has_gpu(const std::vector<core::EnvVar>& env, const NodeBinding& binding,
                  bool visible_devices_set) {
  if (binding.env.empty()) return visible_devices_set;
  for (const auto& var : env) {
    if (var.name == "CUDA_VISIBLE_DEVICES") return true;
  }
  return false;
}

}  // namespace

void plan_node(spank_t sp) {
  PluginState& st = state();
  const auto inputs = read_step_inputs(sp);
  const core::FrameworkSet frameworks =
      st.option_given ? st.option_frameworks : st.config.frameworks;
  const auto plan = core::plan_step(inputs, st.config, frameworks, core::resolve_host);
  st.step_warnings = plan.step_warnings;
  if (st.config.check_ports) warn_about_busy_ports(plan, st);

  const auto& local_ranks = plan.layout.node_ranks[plan.node];
  NodeBinding binding =
      plan_node_binding(sp, st.config, plan, static_cast<std::uint32_t>(local_ranks.size()));
  const bool slurm_visible_devices = get_env(sp, "CUDA_VISIBLE_DEVICES").has_value();
  // A site XML is the same file on every node, so its warnings are said once per step.
  const bool site_topology = !st.config.topology.empty() && st.config.topology.front() == '/';
  auto& binding_warnings = site_topology ? st.step_warnings : st.node_warnings;
  binding_warnings.insert(binding_warnings.end(), binding.warnings.begin(), binding.warnings.end());
  if (auto starved = unavailable_cpu_warning(binding); !starved.empty()) {
    binding_warnings.push_back(std::move(starved));
  }

  std::vector<std::vector<core::EnvVar>> envs;
  envs.reserve(local_ranks.size());
  for (std::size_t local = 0; local < local_ranks.size(); ++local) {
    auto env = core::rank_environment(plan, local_ranks[local]);
    if (local < binding.env.size()) {
      env.insert(env.end(), binding.env[local].begin(), binding.env[local].end());
    }
    if (frameworks.paddle && !task_has_gpu(env, binding, slurm_visible_devices)) {
      // On CPU Paddle's default backend ("auto") builds no global group; its own launcher
      // sets gloo for device-less workers.
      env.push_back({"PADDLE_DISTRI_BACKEND", "gloo", true});
    }
    envs.push_back(std::move(env));
  }
  bool oversized = false;
  for (const auto& env : envs) {
    for (const auto& var : env) oversized = oversized || core::exceeds_exec_limit(var);
  }
  if (oversized) {
    const auto dir = core::make_step_env_dir(st.config.env_dir, inputs.job_id, inputs.step_id);
    const auto names = core::spill_oversized(envs, local_ranks, dir);
    std::string list;
    for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
    st.step_warnings.push_back(
        list + " exceed Linux's " + std::to_string(core::kMaxEnvStringBytes) +
        "-byte limit for one environment string; exported NAME_FILE=path instead (files in " +
        st.config.env_dir + "/dtrain-<uid>-<job>.<step>/ on each node)");
  }

  st.tasks.clear();
  for (std::size_t local = 0; local < local_ranks.size(); ++local) {
    NodeTaskPlan task;
    task.global_rank = local_ranks[local];
    task.env = std::move(envs[local]);
    if (local < binding.cpus.size()) task.cpus = binding.cpus[local];
    st.tasks.push_back(std::move(task));
  }
}

int apply_to_task(spank_t sp) {
  PluginState& st = state();
  if (!st.deferred_error.empty()) {
    log_error(st.deferred_error);
    return -1;
  }
  const int local = get_int(sp, S_TASK_ID, "S_TASK_ID");
  if (local < 0 || static_cast<std::size_t>(local) >= st.tasks.size()) {
    log_error("no plan for local task " + std::to_string(local) + " (planned " +
              std::to_string(st.tasks.size()) + ")");
    return -1;
  }
  const NodeTaskPlan& task = st.tasks[static_cast<std::size_t>(local)];
  const std::uint32_t global = get_u32(sp, S_TASK_GLOBAL_ID, "S_TASK_GLOBAL_ID");
  if (global != task.global_rank) {
    log_error("layout mismatch: Slurm started global rank " + std::to_string(global) +
              " as local task " + std::to_string(local) + " but dtrain planned rank " +
              std::to_string(task.global_rank));
    return -1;
  }
  if (global == 0) {
    for (const auto& w : st.step_warnings) warn_task(w);
  }
  if (local == 0) {
    for (const auto& w : st.node_warnings) warn_task(w);
  }
  for (const auto& var : task.env) {
    if (var.keep_user_value) {
      if (auto existing = get_env(sp, var.name.c_str())) {
        log_verbose("keeping the user's " + var.name + "=" + *existing + " (dtrain planned " +
                    var.value + ")");
        continue;
      }
    }
    set_env(sp, var.name, var.value);
  }
  apply_task_affinity(task.cpus);
  return 0;
}

}  // namespace dtrain::spank
