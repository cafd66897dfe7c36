// SPDX-License-Identifier: Apache-2.0
// dtrain-plan: prints, offline, the rank table and the exact environment each task of a
// step would get from the plugin, using the plugin's own planning code: core::plan_step,
// topology::bind_node and core::node_environment.

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>

#include "core/config.hpp"
#include "core/error.hpp"
#include "core/hostlist.hpp"
#include "core/layout.hpp"
#include "core/net_io.hpp"
#include "core/node_environment.hpp"
#include "core/parse.hpp"
#include "core/step_plan.hpp"
#include "plan/plan_binding.hpp"
#include "plan/plan_report.hpp"
#include "topology/load_io.hpp"
#include "topology/node_binding.hpp"

namespace {

struct Options {
  bool from_env = false;
  std::string nodelist;
  std::string tasks_per_node;
  std::string distribution = "block";
  std::string plane_size;
  std::uint32_t nnodes = 0;
  std::uint32_t ntasks = 0;
  std::string arbitrary_hosts;
  std::uint32_t job_id = 0;
  std::uint32_t step_id = 0;
  std::string resv_ports;
  std::string node_aliases;
  std::string frameworks;
  std::string gpu_view;
  std::vector<std::string> plugstack_args;
  std::string env_ranks;  // "", "all" or a rank number
  std::string topology;
  std::uint32_t node = 0;
  std::string json_file;
};

std::optional<std::string> env_value(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::optional<std::string>(v) : std::nullopt;
}

std::string env_first(std::initializer_list<const char*> names) {
  for (const char* n : names) {
    if (auto v = env_value(n)) return *v;
  }
  return {};
}

void fill_from_slurm_env(Options& o) {
  o.nodelist = env_first({"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST"});
  o.tasks_per_node = env_first({"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"});
  if (o.nodelist.empty() || o.tasks_per_node.empty()) {
    throw dtrain::Error(dtrain::ErrorKind::kInvalidInput,
                        "--from-env needs SLURM_STEP_NODELIST (or SLURM_JOB_NODELIST) and "
                        "SLURM_STEP_TASKS_PER_NODE (or SLURM_TASKS_PER_NODE); run it inside an "
                        "allocation or a step");
  }
  o.distribution = env_first({"SLURM_DISTRIBUTION"});
  o.plane_size = env_first({"SLURM_DIST_PLANESIZE"});
  o.resv_ports = env_first({"SLURM_STEP_RESV_PORTS"});
  o.node_aliases = env_first({"SLURM_NODE_ALIASES"});
  auto number = [](const std::string& text, const char* what) -> std::uint32_t {
    return text.empty() ? 0
                        : static_cast<std::uint32_t>(
                              dtrain::core::parse_unsigned(text, what, 0, UINT32_MAX));
  };
  o.job_id = number(env_first({"SLURM_JOB_ID"}), "SLURM_JOB_ID");
  o.step_id = number(env_first({"SLURM_STEP_ID"}), "SLURM_STEP_ID");
}

// The topology the plugin would bind with: --topology, else a topology= file from
// --plugstack-args. A live topology is each node's own, which offline planning cannot see.
std::optional<dtrain::topology::NodeTopology> binding_topology(
    const Options& o, const dtrain::core::PluginConfig& config) {
  using Kind = dtrain::core::TopologySource::Kind;
  if (!config.bind || config.topology.kind == Kind::kNone) return std::nullopt;
  const std::string file = !o.topology.empty()                   ? o.topology
                           : config.topology.kind == Kind::kFile ? config.topology.path
                                                                 : std::string();
  if (file.empty()) return std::nullopt;
  return dtrain::topology::load_topology(file);
}

int run(const Options& opt) {
  Options o = opt;
  if (o.from_env) fill_from_slurm_env(o);
  const auto config = dtrain::core::parse_plugin_args(o.plugstack_args);
  const auto frameworks =
      o.frameworks.empty() ? config.frameworks : dtrain::core::parse_frameworks(o.frameworks);

  dtrain::core::StepInputs in;
  in.job_id = o.job_id;
  in.step_id = o.step_id;
  in.reserved_ports = o.resv_ports;
  in.node_aliases = o.node_aliases;
  in.spec.nodelist = o.nodelist;
  in.spec.tasks_per_node = o.tasks_per_node;
  in.spec.distribution = dtrain::core::parse_distribution(o.distribution, o.plane_size);
  in.spec.arbitrary_hosts = o.arbitrary_hosts;
  in.spec.nnodes = o.nnodes;
  if (in.spec.nnodes == 0) {
    in.spec.nnodes = static_cast<std::uint32_t>(
        dtrain::core::expand_hostlist(o.nodelist, dtrain::core::kMaxNodes).size());
  }
  in.spec.ntasks = o.ntasks;
  if (in.spec.ntasks == 0) {
    std::uint64_t sum = 0;
    for (auto c : dtrain::core::parse_tasks_per_node(o.tasks_per_node, in.spec.nnodes)) sum += c;
    in.spec.ntasks = static_cast<std::uint32_t>(std::min<std::uint64_t>(sum, UINT32_MAX));
  }
  const auto plan = dtrain::core::plan_step(
      in, config, frameworks, dtrain::core::resolve_host,
      [](const std::string& host) { return dtrain::core::hosts_line(host); });

  std::vector<std::uint32_t> env_ranks;
  if (o.env_ranks == "all") {
    for (std::uint32_t r = 0; r < plan.layout.world_size(); ++r) env_ranks.push_back(r);
  } else if (!o.env_ranks.empty()) {
    const auto r =
        dtrain::core::parse_unsigned(o.env_ranks, "--env", 0, plan.layout.world_size() - 1);
    env_ranks.push_back(static_cast<std::uint32_t>(r));
  }

  nlohmann::json json = dtrain::plan::rank_table_json(plan);
  dtrain::plan::print_rank_table(std::cout, plan);
  for (const auto& w : plan.step_warnings) std::cout << "# warning: " << w << "\n";

  // Each task's environment exactly as the plugin exports it, node by node as the plugin
  // assembles it; with --from-env the step's GPU variables limit the binding as they do there.
  const auto topology = env_ranks.empty() ? std::nullopt : binding_topology(o, config);
  dtrain::topology::StepGpuVariables gpus;
  if (o.from_env) {
    gpus = {env_value("SLURM_STEP_GPUS"), env_value("SLURM_JOB_GPUS"),
            env_value("CUDA_VISIBLE_DEVICES")};
  }
  gpus.slurm_only = config.gpus_from_slurm_only;
  gpus.node_view = dtrain::core::node_gpu_view(
      o.gpu_view.empty() ? config.gpu_view : dtrain::core::parse_gpu_view(o.gpu_view, "--gpu-view"),
      frameworks);
  std::map<std::uint32_t, dtrain::core::NodeEnvironment> node_envs;
  auto environment_of = [&](std::uint32_t rank) -> const std::vector<dtrain::core::EnvVar>& {
    const auto& place = plan.layout.ranks[rank];
    auto it = node_envs.find(place.node);
    if (it == node_envs.end()) {
      const auto local_tasks = plan.layout.local_world_size(place.node);
      const auto binding = topology ? dtrain::topology::bind_node(*topology, local_tasks, gpus).env
                                    : dtrain::topology::unbound_node(gpus);
      it = node_envs.emplace(place.node, dtrain::core::node_environment(plan, place.node, binding))
               .first;
      if (!it->second.spill_warning.empty() && node_envs.size() == 1) {
        std::cout << "# warning: " << it->second.spill_warning << "\n";
      }
    }
    return it->second.tasks[place.local_rank];
  };
  nlohmann::json envs = nlohmann::json::object();
  for (auto r : env_ranks) {
    const auto& env = environment_of(r);
    dtrain::plan::print_task_env(std::cout, r, env);
    envs[std::to_string(r)] = dtrain::plan::env_json(env);
  }
  if (!env_ranks.empty()) json["environment"] = std::move(envs);
  if (!o.topology.empty()) {
    json["binding"] = dtrain::plan::report_binding(std::cout, o.topology, plan, o.node);
  }
  if (!o.json_file.empty()) {
    if (o.json_file == "-") {
      std::cout << json.dump(2) << "\n";
    } else {
      std::ofstream file(o.json_file);
      file << json.dump(2) << "\n";
      if (!file) {
        throw dtrain::Error(dtrain::ErrorKind::kResource, "cannot write --json " + o.json_file);
      }
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{
      "dtrain-plan: print, offline, the rank table, endpoints and per-task environment that\n"
      "srun --distributed-train would give a step, using the plugin's own planning code.\n"
      "Example: dtrain-plan --nodelist 'node[1-4]' --tasks-per-node '4,2,1(x2)' --env 0"};
  app.add_flag("--from-env", o.from_env,
               "Read the step from SLURM_* variables (inside an allocation or step)");
  app.add_option("--nodelist", o.nodelist, "Step node list, e.g. node[1-4]");
  app.add_option("--tasks-per-node", o.tasks_per_node, "As Slurm writes it, e.g. 4,2,1(x2)");
  app.add_option("-m,--distribution", o.distribution, "block, cyclic, plane=N or arbitrary")
      ->capture_default_str();
  app.add_option("--nnodes", o.nnodes, "Node count (default: from the node list)");
  app.add_option("--ntasks", o.ntasks, "Task count (default: sum of tasks per node)");
  app.add_option("--arbitrary-hosts", o.arbitrary_hosts,
                 "For -m arbitrary: the host of each rank in order, e.g. n2,n1,n1");
  app.add_option("--job-id", o.job_id, "Job id (for the derived port formula)");
  app.add_option("--step-id", o.step_id, "Step id (for the derived port formula)");
  app.add_option("--resv-ports", o.resv_ports, "Slurm reserved ports, e.g. 12000-12008");
  app.add_option("--node-aliases", o.node_aliases,
                 "SLURM_NODE_ALIASES of cloud nodes, name:addr:host,... (addresses used as given)");
  app.add_option("--frameworks", o.frameworks, "torch,paddle,tf,jax or all (default: all)");
  app.add_option("--gpu-view", o.gpu_view,
                 "auto, node or task, as srun's --distributed-train-gpu-view (default: the "
                 "plugstack's gpu_view=, auto)");
  app.add_option("--plugstack-args", o.plugstack_args,
                 "plugstack.conf arguments (key=value), e.g. address=name ports=30000-39999")
      ->expected(0, -1);
  app.add_option("--env", o.env_ranks,
                 "Print the exact environment of this rank, or 'all' (binding included with "
                 "--topology or a topology= file)");
  app.add_option("--topology", o.topology,
                 "hwloc XML of the nodes: print the binding table and GPU x NIC matrix, and "
                 "bind --env as the plugin would with topology=FILE");
  app.add_option("--node", o.node, "Node index whose local tasks --topology binds")
      ->capture_default_str();
  app.add_option("--json", o.json_file, "Also write the plan as JSON to FILE ('-': stdout)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);  // prints --help, or CLI11's message for a bad option
    return rc == 0 ? 0 : 2;
  }
  if (!o.from_env && (o.nodelist.empty() || o.tasks_per_node.empty())) {
    std::cerr
        << "dtrain: dtrain-plan: give --nodelist and --tasks-per-node, or --from-env inside an "
           "allocation (see --help)\n";
    return 2;
  }
  try {
    return run(o);
  } catch (const std::exception& e) {
    std::cerr << "dtrain: " << e.what() << "\n";
    return 1;
  }
}
