// SPDX-License-Identifier: Apache-2.0
#include "spank/slurmstepd_user.hpp"

#include <slurm/slurm.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>

#include "core/error.hpp"
#include "core/memory_file_io.hpp"
#include "core/net_io.hpp"
#include "core/node_environment.hpp"
#include "core/parse.hpp"
#include "spank/slurmd_topology_cache.hpp"
#include "spank/slurmstepd_containers.hpp"
#include "spank/slurmstepd_controller.hpp"
#include "spank/spank_io.hpp"
#include "spank/state.hpp"
#include "topology/affinity_io.hpp"
#include "topology/cpu_list.hpp"
#include "topology/load_io.hpp"
#include "topology/node_binding.hpp"
#include "topology/summary.hpp"

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
  in.node_aliases = get_env(sp, "SLURM_NODE_ALIASES").value_or("");
  const std::uint32_t local_tasks = get_u32(sp, S_JOB_LOCAL_TASK_COUNT, "S_JOB_LOCAL_TASK_COUNT");
  auto& placed = in.local_ranks.emplace();
  placed.reserve(local_tasks);
  for (std::uint32_t local = 0; local < local_tasks; ++local) {
    placed.push_back(local_to_global(sp, local));
  }
  const PluginState& st = state();
  if (!st.controller_error.empty()) throw Error(ErrorKind::kResource, st.controller_error);
  if (st.het) {
    // One world across the components, nodes in component order as Slurm's SLURM_NODEID counts
    // them (core/het_step.hpp): each component's own layout (its distribution included) came
    // from slurmctld, and this component's ranks and nodes are shifted past the earlier ones.
    in.spec.nodelist = st.het->nodelist;
    in.spec.tasks_per_node = st.het->tasks_per_node;
    in.spec.distribution = {core::DistributionKind::kArbitrary, 0};
    // srun merges the components' reserved ports and hands the merged list to every
    // component's nodes (srun_job.c, _create_job_step), so SLURM_STEP_RESV_PORTS is one string
    // across the step; derived ports come from component 0's job id on every node.
    in.job_id = st.het->leader_job_id;
    in.spec.arbitrary_hosts = st.het->hosts_of_ranks;
    in.spec.nnodes = st.het->node_count;
    in.spec.ntasks = st.het->task_count;
    in.node_id += st.het->node_offset;
    for (auto& rank : placed) rank += st.het->rank_offset;
  } else if (in.spec.distribution.kind == core::DistributionKind::kArbitrary) {
    if (st.arbitrary_hosts.empty()) {
      throw Error(ErrorKind::kResource,
                  "the hosts of this -m arbitrary step were not fetched from slurmctld");
    }
    in.spec.arbitrary_hosts = st.arbitrary_hosts;
  }
  return in;
}

// A port of the step held by another user's process is a step failure: the other ranks could
// rendezvous with that process instead of with this node's rank. Held by the user's own process
// (an earlier step of theirs, say), or bound by a process that does not listen on it, it fails
// the step when a framework the step exports binds that port (core::frameworks_binding): that
// framework would stop later with EADDRINUSE while the other ranks wait, or talk to the holder.
// A port no exported framework binds (an endpoint port of a PyTorch-only step) is a warning:
// only dtrain's bootstrap listens there, and it names a busy port itself.
void check_busy_port(const core::StepPlan& plan, PluginState& st, std::uint16_t port,
                     core::StepPortKind kind, const std::string& what) {
  const auto& addr = plan.local_address;
  if (!core::port_in_use(addr, port)) return;
  const std::string where =
      "port " + std::to_string(port) + " on " + plan.layout.hosts[plan.node] + " (" + addr + ")";
  const std::string find_it =
      "find the holder with `ss -ltnp 'sport = :" + std::to_string(port) + "'` on that node";
  const auto holder = core::listener_uid(addr, port);
  if (holder && *holder != geteuid()) {
    throw Error(ErrorKind::kMismatch,
                where + ", " + what + ", is held by a process of another user (uid " +
                    std::to_string(*holder) +
                    "); the step stops so that no rank connects to it. Fix: ask the site for "
                    "exclusive nodes or Slurm's reserved ports (MpiParams=ports=A-B), or " +
                    find_it);
  }
  const std::string held = holder ? "is already in use by another process of yours"
                                  : "is already bound by a process that does not listen on it";
  const auto binders = core::frameworks_binding(plan.frameworks, kind);
  if (!binders.empty()) {
    throw Error(ErrorKind::kMismatch,
                where + ", " + what + ", " + held + ", and " + binders +
                    " binds it: the step stops here rather than fail with EADDRINUSE later. Fix: "
                    "end that process (an earlier step of yours that still runs?) and run the "
                    "step again (a new step id also gets other ports), or " +
                    find_it +
                    ", or let Slurm reserve each step's ports (MpiParams=ports=A-B in "
                    "slurm.conf)");
  }
  st.node_warnings.push_back(where + ", " + what + ", " + held +
                             "; no framework this step exports binds it, only dtrain's bootstrap "
                             "would. Fix: stop that process, or let Slurm reserve each step's "
                             "ports (MpiParams=ports=A-B in slurm.conf)");
}

void check_busy_ports(const core::StepPlan& plan, PluginState& st) {
  const auto local_count = plan.layout.local_world_size(plan.node);
  for (std::uint32_t local = 0; local < local_count; ++local) {
    check_busy_port(plan, st, plan.ports.endpoint_ports[local], core::StepPortKind::kEndpoint,
                    "the endpoint of local rank " + std::to_string(local));
  }
  if (plan.layout.ranks[0].node == plan.node) {
    check_busy_port(plan, st, plan.ports.master, core::StepPortKind::kMaster,
                    "the master port (DTRAIN_MASTER_PORT)");
  }
}

topology::StepGpuVariables step_gpu_variables(spank_t sp, const PluginState& st,
                                              const core::FrameworkSet& frameworks) {
  const core::GpuView view = st.option_gpu_view.value_or(st.config.gpu_view);
  return {get_env(sp, "SLURM_STEP_GPUS"), get_env(sp, "SLURM_JOB_GPUS"),
          get_env(sp, "CUDA_VISIBLE_DEVICES"), st.config.gpus_from_slurm_only,
          core::node_gpu_view(view, frameworks)};
}

// Loads the configured topology; a broken site XML falls back to this machine's own
// topology (CPU-only in practice) with a warning, so the step never fails for it.
topology::NodeTopology load_for_step(const core::PluginConfig& config,
                                     std::vector<std::string>& warnings) {
  if (config.topology.kind == core::TopologySource::Kind::kFile) {
    try {
      return topology::load_topology(config.topology.path);
    } catch (const Error& e) {
      warnings.push_back(std::string(e.what()) +
                         "; binding from this machine's own topology instead");
    }
  } else {
    // A damaged cache is only a lost shortcut: the XML next, then discovery.
    if (auto summary = load_trusted_summary(config.topology_cache)) return std::move(*summary);
    if (const auto cached = trusted_topology_cache(config.topology_cache); !cached.empty()) {
      try {
        return topology::load_topology(cached);
      } catch (const Error&) {
      }
    }
  }
  return topology::load_topology("");
}

// Never fails the step: a topology problem becomes a warning and no binding.
topology::NodeBinding bind_local_tasks(const core::PluginConfig& config, unsigned local_tasks,
                                       const topology::StepGpuVariables& gpus) {
  topology::NodeBinding out;
  out.env = topology::unbound_node(gpus);
  if (!config.bind || config.topology.kind == core::TopologySource::Kind::kNone) return out;
  std::vector<std::string> load_warnings;
  try {
    // slurmstepd runs in the step's cpuset: when that is less than the machine, the tasks'
    // shares are cut from it rather than from the whole node.
    std::optional<topology::CpuList> step_cpus;
    const auto allowed = topology::current_affinity();
    if (const auto online = topology::online_cpus(); !online.empty() && allowed != online) {
      step_cpus = allowed;
    }
    out = topology::bind_node(load_for_step(config, load_warnings), local_tasks, gpus, step_cpus);
  } catch (const std::exception& e) {
    out = {topology::unbound_node(gpus), {}, {}, {}};
    out.warnings.push_back(std::string("no GPU/NIC/CPU binding for this step: ") + e.what());
  }
  out.warnings.insert(out.warnings.begin(), load_warnings.begin(), load_warnings.end());
  return out;
}

// One warning naming the local tasks none of whose planned CPUs this step may use; empty
// when every task can be bound.
std::string unavailable_cpu_warning(const std::vector<topology::CpuList>& planned_cpus,
                                    const core::PluginConfig& config) {
  const auto allowed = topology::current_affinity();
  std::vector<unsigned> starved;
  for (unsigned local = 0; local < planned_cpus.size(); ++local) {
    const auto& planned = planned_cpus[local];
    if (!planned.empty() && topology::intersect_cpus(planned, allowed).empty()) {
      starved.push_back(local);
    }
  }
  if (starved.empty()) return {};
  const bool site_file = config.topology.kind == core::TopologySource::Kind::kFile;
  return "local tasks " + topology::format_cpu_list(starved) +
         ": none of their planned CPUs (DTRAIN_CPU_LIST) is among the CPUs this step may use (" +
         topology::format_cpu_list(allowed) + "); CPU affinity left unchanged. " +
         (site_file ? "The CPUs of topology=" + config.topology.path +
                          " are not this node's: give each node type its own file"
                    : std::string("The node's topology and its CPUs disagree"));
}

// Restricts the calling task to planned ∩ allowed CPUs (left as it is when that is empty).
void apply_task_affinity(const std::vector<unsigned>& planned) {
  if (planned.empty()) return;
  try {
    topology::apply_cpu_affinity(planned);
  } catch (const std::exception& e) {
    warn_task(std::string("CPU affinity not applied: ") + e.what());
  }
}

// Whose memory files this task makes, as readers name the task: SLURM_JOB_ID (a het step's
// component 0's, as Slurm sets it in every component), SLURM_STEP_ID, and the global rank, which
// is SLURM_PROCID.
core::MemoryFileOwner memory_file_owner(spank_t sp, std::uint32_t global_rank) {
  const auto id = [&](const char* name) {
    return static_cast<std::uint32_t>(
        core::parse_unsigned(required_env(sp, name), name, 0, UINT32_MAX));
  };
  return {id("SLURM_JOB_ID"), id("SLURM_STEP_ID"), global_rank};
}

// The plugin's own time, phase by phase, for slurmd's log at debug level: what a step costs on
// each node (tests/bench/launch_overhead.sh measures the step as a whole).
class PhaseClock {
 public:
  void phase_done(const char* name) {
    const auto now = std::chrono::steady_clock::now();
    text_ += (text_.empty() ? "" : ", ") + std::string(name) + " " + milliseconds(last_, now);
    last_ = now;
  }
  std::string summary() const {
    return milliseconds(start_, std::chrono::steady_clock::now()) + " ms (" + text_ + ")";
  }

 private:
  static std::string milliseconds(std::chrono::steady_clock::time_point from,
                                  std::chrono::steady_clock::time_point to) {
    char text[32];
    std::snprintf(text, sizeof text, "%.2f",
                  std::chrono::duration<double, std::milli>(to - from).count());
    return text;
  }
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point last_ = start_;
  std::string text_;
};

}  // namespace

void plan_node(spank_t sp) {
  PhaseClock clock;
  PluginState& st = state();
  st.tasks.clear();
  st.plan.reset();
  const auto inputs = read_step_inputs(sp);
  const core::FrameworkSet frameworks =
      st.option_given ? st.option_frameworks : st.config.frameworks;
  auto plan = core::plan_step(inputs, st.config, frameworks, core::resolve_host,
                              [](const std::string& host) { return core::hosts_line(host); });
  st.step_warnings = plan.step_warnings;
  clock.phase_done("plan");
  if (st.config.check_ports) check_busy_ports(plan, st);
  clock.phase_done("port check");

  const auto local_tasks = static_cast<unsigned>(plan.layout.node_ranks[plan.node].size());
  auto binding = bind_local_tasks(st.config, local_tasks, step_gpu_variables(sp, st, frameworks));
  clock.phase_done("binding");
  for (const auto& note : binding.notes) log_verbose(note);
  // A site XML is the same file on every node, so its warnings are said once per step.
  const bool site_topology = st.config.topology.kind == core::TopologySource::Kind::kFile;
  auto& binding_warnings = site_topology ? st.step_warnings : st.node_warnings;
  binding_warnings.insert(binding_warnings.end(), binding.warnings.begin(), binding.warnings.end());
  if (auto starved = unavailable_cpu_warning(binding.cpus, st.config); !starved.empty()) {
    binding_warnings.push_back(std::move(starved));
  }

  st.user_values.clear();
  for (const auto& name : core::user_settable_names(plan, binding.env)) {
    if (auto value = get_env(sp, name.c_str())) st.user_values.emplace(name, *value);
  }

  const auto& local_ranks = plan.layout.node_ranks[plan.node];
  st.tasks.clear();
  for (std::size_t local = 0; local < local_ranks.size(); ++local) {
    NodeTaskPlan task;
    task.global_rank = local_ranks[local];
    if (local < binding.cpus.size()) task.cpus = binding.cpus[local];
    st.tasks.push_back(std::move(task));
  }
  st.binding_env = std::move(binding.env);
  st.plan = std::move(plan);
  clock.phase_done("environment");
  log_debug("user_init on node " + std::to_string(st.plan->node) + " (" +
            st.plan->layout.hosts[st.plan->node] + "), " + std::to_string(local_tasks) +
            " local tasks: " + clock.summary());
}

int apply_to_task(spank_t sp) {
  PhaseClock clock;
  PluginState& st = state();
  if (!st.planning_error.empty()) {
    return -1;
  }
  restore_container_request(sp);
  const int local = get_int(sp, S_TASK_ID, "S_TASK_ID");
  if (local < 0 || static_cast<std::size_t>(local) >= st.tasks.size()) {
    log_error("no plan for local task " + std::to_string(local) + " (planned " +
              std::to_string(st.tasks.size()) + ")");
    return -1;
  }
  if (!st.plan) {
    log_error("no plan for this node's tasks");
    return -1;
  }
  const NodeTaskPlan& task = st.tasks[static_cast<std::size_t>(local)];
  // In a het step Slurm numbers tasks within the component; SLURM_PROCID adds the offset.
  const std::uint32_t global =
      get_u32(sp, S_TASK_GLOBAL_ID, "S_TASK_GLOBAL_ID") + (st.het ? st.het->rank_offset : 0);
  if (global != task.global_rank) {
    log_error("layout mismatch: Slurm started global rank " + std::to_string(global) +
              " as local task " + std::to_string(local) + " but dtrain planned rank " +
              std::to_string(task.global_rank));
    return -1;
  }
  // Built here, in the task's own process: a large step's endpoint lists are megabytes per task.
  const auto env = core::task_environment(*st.plan, st.plan->node,
                                          static_cast<std::uint32_t>(local), st.binding_env);
  if (global == 0) {
    for (const auto& w : st.step_warnings) warn_task(w);
    if (!env.spill_warning.empty()) warn_task(env.spill_warning);
  }
  if (local == 0) {
    for (const auto& w : st.node_warnings) warn_task(w);
  }
  // Values too long for execve go to memory files made here, in the task itself: each lives
  // exactly as long as the task, in its namespaces, and is inherited by what the task starts.
  const bool any_memory_file = std::any_of(
      env.vars.begin(), env.vars.end(), [](const auto& var) { return var.value_in_memory_file; });
  const auto memory_file_paths =
      any_memory_file ? core::export_memory_files(memory_file_owner(sp, global), env.vars)
                      : std::vector<std::string>(env.vars.size());
  for (std::size_t i = 0; i < env.vars.size(); ++i) {
    const auto& var = env.vars[i];
    if (const auto user = st.user_values.find(var.name);
        var.keep_user_value && user != st.user_values.end()) {
      log_verbose("keeping the user's " + var.name + "=" + user->second + " (dtrain planned " +
                  var.value + ")");
      set_env(sp, var.name, user->second);
      continue;
    }
    set_env(sp, var.name, var.value_in_memory_file ? memory_file_paths[i] : var.value);
  }
  for (const auto& name : env.remove) unset_env(sp, name);
  clock.phase_done("variables");
  apply_task_affinity(task.cpus);
  clock.phase_done("affinity");
  log_debug("task_init of local task " + std::to_string(local) + ": " + clock.summary());
  return 0;
}

}  // namespace dtrain::spank
