// SPDX-License-Identifier: Apache-2.0
#include "core/het_step.hpp"

#include <algorithm>
#include <unordered_map>

#include "core/error.hpp"
#include "core/hostlist.hpp"
#include "core/layout.hpp"

namespace dtrain::core {
namespace {

std::string component_name(std::size_t index, std::uint32_t job_id) {
  return "component " + std::to_string(index) + " (job " + std::to_string(job_id) + ")";
}

// Up to five names of `hosts`, for messages.
std::string some_hosts(const std::vector<std::string>& hosts) {
  std::string out;
  for (std::size_t i = 0; i < hosts.size() && i < 5; ++i) {
    if (i) out += ',';
    out += hosts[i];
  }
  if (hosts.size() > 5) out += ",... (" + std::to_string(hosts.size()) + " in all)";
  return out;
}

// The layout must give each of its task ids exactly one node.
void check_component(const ComponentLayout& layout, const std::string& name) {
  if (layout.hosts.size() != layout.task_ids.size() || layout.hosts.empty()) {
    throw Error(ErrorKind::kMismatch, "slurmctld returned an inconsistent layout for " + name);
  }
  std::vector<bool> seen(layout.task_count, false);
  std::uint64_t placed = 0;
  for (const auto& ids : layout.task_ids) {
    for (std::uint32_t id : ids) {
      if (id >= layout.task_count || seen[id]) {
        throw Error(ErrorKind::kMismatch, "slurmctld's layout for " + name + " places task " +
                                              std::to_string(id) + " twice or outside its " +
                                              std::to_string(layout.task_count) + " tasks");
      }
      seen[id] = true;
      ++placed;
    }
  }
  if (placed != layout.task_count) {
    throw Error(ErrorKind::kMismatch, "slurmctld's layout for " + name + " places " +
                                          std::to_string(placed) + " of its " +
                                          std::to_string(layout.task_count) + " tasks");
  }
}

// The world must be the step Slurm launched: the nodes of SLURM_STEP_NODELIST with the tasks of
// SLURM_STEP_TASKS_PER_NODE. A component whose answer went missing shows up here.
void check_against_environment(const HetWorld& world, const std::vector<std::string>& world_hosts,
                               const std::vector<std::uint32_t>& world_counts,
                               std::string_view step_nodelist,
                               std::string_view step_tasks_per_node) {
  const auto env_hosts = expand_hostlist(step_nodelist, kMaxNodes);
  const auto env_counts =
      parse_tasks_per_node(step_tasks_per_node, static_cast<std::uint32_t>(env_hosts.size()));
  std::unordered_map<std::string, std::uint32_t> env_tasks;
  std::uint64_t env_total = 0;
  for (std::size_t i = 0; i < env_hosts.size(); ++i) {
    env_tasks[env_hosts[i]] = env_counts[i];
    env_total += env_counts[i];
  }
  std::vector<std::string> missing;
  std::vector<std::string> differing;
  for (std::size_t i = 0; i < world_hosts.size(); ++i) {
    const auto it = env_tasks.find(world_hosts[i]);
    if (it == env_tasks.end()) {
      missing.push_back(world_hosts[i]);
    } else if (it->second != world_counts[i]) {
      differing.push_back(world_hosts[i] + " (" + std::to_string(world_counts[i]) + " against " +
                          std::to_string(it->second) + ")");
    }
  }
  std::vector<std::string> unknown;
  if (env_tasks.size() != world_hosts.size() || env_total != world.task_count) {
    std::unordered_map<std::string, bool> in_world;
    for (const auto& host : world_hosts) in_world[host] = true;
    for (const auto& host : env_hosts)
      if (!in_world.count(host)) unknown.push_back(host);
  }
  if (missing.empty() && differing.empty() && unknown.empty() && env_total == world.task_count) {
    return;
  }
  std::string why = "heterogeneous step: the components slurmctld described hold " +
                    std::to_string(world.node_count) + " nodes and " +
                    std::to_string(world.task_count) + " tasks, but this step runs " +
                    std::to_string(env_tasks.size()) + " nodes and " + std::to_string(env_total) +
                    " tasks (SLURM_STEP_NODELIST=" + std::string(step_nodelist) +
                    ", SLURM_STEP_TASKS_PER_NODE=" + std::string(step_tasks_per_node) + ")";
  if (!unknown.empty()) why += "; no component holds " + some_hosts(unknown);
  if (!missing.empty()) why += "; not in the step: " + some_hosts(missing);
  if (!differing.empty()) why += "; task counts differ on " + some_hosts(differing);
  why += ". The step stops rather than form a world that differs from Slurm's";
  throw Error(ErrorKind::kMismatch, why);
}

}  // namespace

HetWorld combine_het_components(const std::vector<ComponentAnswer>& answers,
                                std::uint32_t own_job_id, std::string_view step_nodelist,
                                std::string_view step_tasks_per_node) {
  if (answers.empty()) {
    throw Error(ErrorKind::kInvalidInput,
                "heterogeneous step: no SLURM_JOB_ID_HET_GROUP_0 (or _PACK_GROUP_0) in the step's "
                "environment, so its components cannot be found");
  }
  HetWorld world;
  world.leader_job_id = answers.front().job_id;
  bool own_found = false;
  std::vector<std::string> hosts;
  std::vector<std::uint32_t> counts;
  std::unordered_map<std::string, std::size_t> component_of_host;
  std::vector<std::uint32_t> host_of_rank;
  for (std::size_t k = 0; k < answers.size(); ++k) {
    const auto& answer = answers[k];
    const std::string name = component_name(k, answer.job_id);
    const bool own = answer.job_id == own_job_id;
    if (!answer.layout) {
      if (answer.not_in_step && !own) {
        world.left_out.push_back(static_cast<std::uint32_t>(k));
        continue;
      }
      throw Error(ErrorKind::kResource,
                  "heterogeneous step: cannot get the layout of " + name + " from slurmctld" +
                      (answer.error.empty() ? std::string() : ": " + answer.error) +
                      ". The step stops rather than form a world without that component's "
                      "ranks; run it again, and if this persists check slurmctld's log");
    }
    const auto& layout = *answer.layout;
    check_component(layout, name);
    if (own) {
      own_found = true;
      world.own_component = static_cast<std::uint32_t>(k);
      world.rank_offset = world.task_count;
      world.node_offset = static_cast<std::uint32_t>(hosts.size());
    }
    if (static_cast<std::uint64_t>(world.task_count) + layout.task_count > kMaxTasks ||
        hosts.size() + layout.hosts.size() > kMaxNodes) {
      throw Error(ErrorKind::kInvalidInput, "heterogeneous step: more than " +
                                                std::to_string(kMaxTasks) + " tasks or " +
                                                std::to_string(kMaxNodes) + " nodes");
    }
    host_of_rank.resize(world.task_count + layout.task_count);
    for (std::size_t node = 0; node < layout.hosts.size(); ++node) {
      const auto& host = layout.hosts[node];
      const auto [it, inserted] = component_of_host.emplace(host, k);
      if (!inserted) {
        throw Error(ErrorKind::kInvalidInput,
                    "heterogeneous step: node " + host + " runs tasks of two components (" +
                        std::to_string(it->second) + " and " + std::to_string(k) +
                        "); dtrain supports het steps whose components run on separate nodes "
                        "only (one endpoint list per node)");
      }
      const auto index = static_cast<std::uint32_t>(hosts.size());
      hosts.push_back(host);
      counts.push_back(static_cast<std::uint32_t>(layout.task_ids[node].size()));
      for (std::uint32_t id : layout.task_ids[node]) host_of_rank[world.task_count + id] = index;
    }
    world.task_count += layout.task_count;
  }
  if (!own_found) {
    throw Error(ErrorKind::kMismatch, "heterogeneous step: this node's job " +
                                          std::to_string(own_job_id) +
                                          " is none of the components SLURM_JOB_ID_HET_GROUP_<k> "
                                          "names");
  }
  world.node_count = static_cast<std::uint32_t>(hosts.size());
  check_against_environment(world, hosts, counts, step_nodelist, step_tasks_per_node);
  for (std::size_t i = 0; i < hosts.size(); ++i) {
    if (i) {
      world.nodelist += ',';
      world.tasks_per_node += ',';
    }
    world.nodelist += hosts[i];
    world.tasks_per_node += std::to_string(counts[i]);
  }
  for (std::size_t r = 0; r < host_of_rank.size(); ++r) {
    if (r) world.hosts_of_ranks += ',';
    world.hosts_of_ranks += hosts[host_of_rank[r]];
  }
  return world;
}

}  // namespace dtrain::core
