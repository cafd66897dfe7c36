#include "spank/slurmstepd_controller.hpp"

#include <slurm/slurm.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "core/error.hpp"
#include "core/hostlist.hpp"
#include "core/layout.hpp"
#include "core/parse.hpp"
#include "spank/spank_io.hpp"
#include "spank/state.hpp"

namespace dtrain::spank {

namespace {

// One step's layout as slurmctld holds it: its hosts in node order and, per node, the step's
// task ids there.
struct ControllerLayout {
  std::vector<std::string> hosts;
  std::vector<std::vector<std::uint32_t>> task_ids;  // index: node
  std::uint32_t task_count = 0;
};

ControllerLayout layout_from_controller(std::uint32_t job_id, std::uint32_t step_id,
                                        const char* needed_for) {
  slurm_step_id_t id{};
  id.job_id = job_id;
  id.step_id = step_id;
  id.step_het_comp = NO_VAL;
  std::unique_ptr<slurm_step_layout_t, decltype(&slurm_job_step_layout_free)> layout(
      slurm_job_step_layout_get(&id), &slurm_job_step_layout_free);
  if (!layout || !layout->node_list || !layout->tasks || !layout->tids) {
    throw Error(ErrorKind::kResource, "cannot get the layout of step " + std::to_string(job_id) +
                                          "." + std::to_string(step_id) + " from slurmctld (" +
                                          needed_for + ")");
  }
  ControllerLayout out;
  out.hosts = core::expand_hostlist(layout->node_list, layout->node_cnt);
  if (out.hosts.size() != layout->node_cnt || layout->task_cnt > core::kMaxTasks) {
    throw Error(ErrorKind::kMismatch, "slurmctld returned an inconsistent step layout");
  }
  out.task_count = layout->task_cnt;
  out.task_ids.resize(layout->node_cnt);
  for (std::uint32_t node = 0; node < layout->node_cnt; ++node) {
    for (std::uint32_t i = 0; i < layout->tasks[node]; ++i) {
      const std::uint32_t task = layout->tids[node][i];
      if (task >= layout->task_cnt) {
        throw Error(ErrorKind::kMismatch, "slurmctld returned task id " + std::to_string(task) +
                                              " outside the step's " +
                                              std::to_string(layout->task_cnt) + " tasks");
      }
      out.task_ids[node].push_back(task);
    }
  }
  return out;
}

// Places `layout`'s tasks, shifted by `offset`, into host_of_rank.
void place(const ControllerLayout& layout, std::uint32_t offset,
           std::vector<const std::string*>& host_of_rank) {
  for (std::size_t node = 0; node < layout.hosts.size(); ++node) {
    for (std::uint32_t task : layout.task_ids[node]) {
      host_of_rank.at(offset + task) = &layout.hosts[node];
    }
  }
}

std::string join_hosts_of_ranks(const std::vector<const std::string*>& host_of_rank) {
  std::string list;
  for (std::uint32_t r = 0; r < host_of_rank.size(); ++r) {
    if (!host_of_rank[r]) {
      throw Error(ErrorKind::kMismatch,
                  "slurmctld's layout places no node for rank " + std::to_string(r));
    }
    if (r) list += ',';
    list += *host_of_rank[r];
  }
  return list;
}

// The component job ids of a heterogeneous job, in component order (22.05 names them
// SLURM_JOB_ID_PACK_GROUP_<k>, later releases SLURM_JOB_ID_HET_GROUP_<k>).
std::vector<std::uint32_t> component_job_ids(spank_t sp) {
  std::vector<std::uint32_t> ids;
  for (std::uint32_t k = 0; k < core::kMaxNodes; ++k) {
    const std::string suffix = "_GROUP_" + std::to_string(k);
    auto value = get_env(sp, ("SLURM_JOB_ID_HET" + suffix).c_str());
    if (!value) value = get_env(sp, ("SLURM_JOB_ID_PACK" + suffix).c_str());
    if (!value) break;
    ids.push_back(static_cast<std::uint32_t>(core::parse_unsigned(
        *value, "SLURM_JOB_ID_HET_GROUP_" + std::to_string(k), 1, 0xFFFFFFFEu)));
  }
  return ids;
}

// A het step (srun A : B) runs one step per component job; each slurmstepd sees only its own
// component in the SPANK items, while SLURM_STEP_NODELIST and SLURM_STEP_TASKS_PER_NODE hold all
// of them. The components' layouts, in order, give every rank's host: rank = the component's
// offset + its task id, which is the SLURM_PROCID Slurm gives.
void fetch_het_layout(spank_t sp, HetStep& het) {
  const auto own_job = get_u32(sp, S_JOB_ID, "S_JOB_ID");
  const auto step_id = get_u32(sp, S_JOB_STEPID, "S_JOB_STEPID");
  const auto jobs = component_job_ids(sp);
  if (jobs.empty()) {
    throw Error(ErrorKind::kInvalidInput,
                "heterogeneous step: no SLURM_JOB_ID_HET_GROUP_0 (or _PACK_GROUP_0) in the step's "
                "environment, so its components cannot be found");
  }
  het.leader_job_id = jobs.front();
  std::vector<ControllerLayout> layouts;
  std::uint32_t total = 0;
  std::vector<std::uint32_t> offsets;
  for (std::size_t k = 0; k < jobs.size(); ++k) {
    ControllerLayout layout;
    try {
      layout = layout_from_controller(jobs[k], step_id, "a heterogeneous step");
    } catch (const Error&) {
      if (jobs[k] == own_job) throw;
      continue;  // this component does not take part in the step (srun --het-group)
    }
    if (jobs[k] == own_job) {
      het.rank_offset = total;
      het.node_offset = 0;
      for (const auto& earlier : layouts)
        het.node_offset += static_cast<std::uint32_t>(earlier.hosts.size());
    }
    offsets.push_back(total);
    total += layout.task_count;
    layouts.push_back(std::move(layout));
  }
  std::vector<std::string> nodes;
  for (const auto& layout : layouts) {
    for (const auto& host : layout.hosts) {
      if (std::find(nodes.begin(), nodes.end(), host) != nodes.end()) {
        throw Error(ErrorKind::kInvalidInput,
                    "heterogeneous step: node " + host +
                        " runs tasks of two components; dtrain supports het steps whose "
                        "components run on separate nodes only (one endpoint list per node)");
      }
      nodes.push_back(host);
    }
  }
  std::vector<const std::string*> host_of_rank(total, nullptr);
  for (std::size_t k = 0; k < layouts.size(); ++k) place(layouts[k], offsets[k], host_of_rank);
  het.hosts_of_ranks = join_hosts_of_ranks(host_of_rank);
  het.node_count = static_cast<std::uint32_t>(nodes.size());
  het.task_count = total;
}

// Whether the step's environment describes more tasks than this component holds.
bool is_het_step(spank_t sp) {
  const auto tasks_per_node = get_env(sp, "SLURM_STEP_TASKS_PER_NODE");
  const auto nodelist = get_env(sp, "SLURM_STEP_NODELIST");
  if (!tasks_per_node || !nodelist) return false;
  if (!get_env(sp, "SLURM_HET_SIZE") && !get_env(sp, "SLURM_PACK_SIZE")) return false;
  const auto hosts = core::expand_hostlist(*nodelist, core::kMaxNodes);
  const auto counts =
      core::parse_tasks_per_node(*tasks_per_node, static_cast<std::uint32_t>(hosts.size()));
  std::uint64_t total = 0;
  for (auto c : counts) total += c;
  return total > get_u32(sp, S_JOB_TOTAL_TASK_COUNT, "S_JOB_TOTAL_TASK_COUNT");
}

}  // namespace

void fetch_step_hosts(spank_t sp) {
  PluginState& st = state();
  try {
    if (is_het_step(sp)) {
      HetStep het;
      fetch_het_layout(sp, het);
      st.het = std::move(het);
      return;
    }
    const auto distribution =
        core::parse_distribution(get_env(sp, "SLURM_DISTRIBUTION").value_or(""),
                                 get_env(sp, "SLURM_DIST_PLANESIZE").value_or(""));
    if (distribution.kind != core::DistributionKind::kArbitrary) return;
    st.arbitrary_hosts = arbitrary_hosts_from_controller(get_u32(sp, S_JOB_ID, "S_JOB_ID"),
                                                         get_u32(sp, S_JOB_STEPID, "S_JOB_STEPID"));
  } catch (const std::exception& e) {
    st.controller_error = e.what();
  }
}

std::string arbitrary_hosts_from_controller(std::uint32_t job_id, std::uint32_t step_id) {
  const auto layout = layout_from_controller(job_id, step_id, "needed for -m arbitrary");
  std::vector<const std::string*> host_of_rank(layout.task_count, nullptr);
  place(layout, 0, host_of_rank);
  return join_hosts_of_ranks(host_of_rank);
}

}  // namespace dtrain::spank
