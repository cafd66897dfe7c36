// SPDX-License-Identifier: Apache-2.0
#include "spank/slurmstepd_controller.hpp"

#include <slurm/slurm.h>

#include <cerrno>
#include <memory>
#include <optional>
#include <vector>

#include "core/error.hpp"
#include "core/het_step.hpp"
#include "core/hostlist.hpp"
#include "core/layout.hpp"
#include "core/parse.hpp"
#include "spank/spank_io.hpp"
#include "spank/state.hpp"

namespace dtrain::spank {

namespace {

// One step's layout from slurmctld, or why there is none: errno after
// slurm_job_step_layout_get, ESLURM_INVALID_JOB_ID when the job runs no such step.
struct ControllerAnswer {
  std::optional<core::ComponentLayout> layout;
  int error = 0;
};

ControllerAnswer ask_controller(std::uint32_t job_id, std::uint32_t step_id) {
  slurm_step_id_t id{};
  id.job_id = job_id;
  id.step_id = step_id;
  id.step_het_comp = NO_VAL;
  errno = 0;
  std::unique_ptr<slurm_step_layout_t, decltype(&slurm_job_step_layout_free)> layout(
      slurm_job_step_layout_get(&id), &slurm_job_step_layout_free);
  ControllerAnswer answer;
  if (!layout) {
    answer.error = errno ? errno : SLURM_ERROR;
    return answer;
  }
  if (!layout->node_list || !layout->tasks || !layout->tids || layout->task_cnt > core::kMaxTasks) {
    throw Error(ErrorKind::kMismatch, "slurmctld returned an inconsistent layout for step " +
                                          std::to_string(job_id) + "." + std::to_string(step_id));
  }
  auto& out = answer.layout.emplace();
  out.hosts = core::expand_hostlist(layout->node_list, layout->node_cnt);
  if (out.hosts.size() != layout->node_cnt) {
    throw Error(ErrorKind::kMismatch, "slurmctld returned an inconsistent layout for step " +
                                          std::to_string(job_id) + "." + std::to_string(step_id));
  }
  out.task_count = layout->task_cnt;
  out.task_ids.resize(layout->node_cnt);
  for (std::uint32_t node = 0; node < layout->node_cnt; ++node) {
    if (layout->tasks[node] > layout->task_cnt) {
      throw Error(ErrorKind::kMismatch, "slurmctld returned an inconsistent layout for step " +
                                            std::to_string(job_id) + "." + std::to_string(step_id));
    }
    out.task_ids[node].assign(layout->tids[node], layout->tids[node] + layout->tasks[node]);
  }
  return answer;
}

std::string join_hosts_of_ranks(const core::ComponentLayout& layout) {
  std::vector<const std::string*> host_of_rank(layout.task_count, nullptr);
  for (std::size_t node = 0; node < layout.hosts.size(); ++node) {
    for (std::uint32_t task : layout.task_ids[node]) {
      if (task >= layout.task_count) {
        throw Error(ErrorKind::kMismatch, "slurmctld returned task id " + std::to_string(task) +
                                              " outside the step's " +
                                              std::to_string(layout.task_count) + " tasks");
      }
      host_of_rank[task] = &layout.hosts[node];
    }
  }
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

// The component job ids of a heterogeneous job, in component order. salloc and sbatch set both
// SLURM_JOB_ID_PACK_GROUP_<k> and SLURM_JOB_ID_HET_GROUP_<k>; an srun that makes its own het
// allocation sets only the PACK names (srun_job.c, _build_key), in 22.05 as in 25.11.
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
// of them, sorted. Every component's layout comes from slurmctld, one request per component;
// core::combine_het_components makes the world and checks it against those two variables.
core::HetWorld fetch_het_world(spank_t sp) {
  const auto own_job = get_u32(sp, S_JOB_ID, "S_JOB_ID");
  const auto step_id = get_u32(sp, S_JOB_STEPID, "S_JOB_STEPID");
  std::vector<core::ComponentAnswer> answers;
  for (const auto job : component_job_ids(sp)) {
    auto& answer = answers.emplace_back();
    answer.job_id = job;
    auto reply = ask_controller(job, step_id);
    if (reply.layout) {
      answer.layout = std::move(reply.layout);
    } else if (reply.error == ESLURM_INVALID_JOB_ID) {
      answer.not_in_step = true;  // what slurmctld answers for a component the step leaves out
    } else {
      answer.error = slurm_strerror(reply.error);
    }
  }
  return core::combine_het_components(answers, own_job,
                                      get_env(sp, "SLURM_STEP_NODELIST").value_or(""),
                                      get_env(sp, "SLURM_STEP_TASKS_PER_NODE").value_or(""));
}

// Whether the step's environment describes more tasks than this component holds: srun A : B.
// In a het job that is a het step; in an ordinary allocation srun runs the components as parts
// of one step (step_het_comp) without SLURM_HET_SIZE (srun_job.c, local_het_step), which dtrain
// does not support: it says so instead of failing on the lists.
bool is_het_step(spank_t sp) {
  const auto tasks_per_node = get_env(sp, "SLURM_STEP_TASKS_PER_NODE");
  const auto nodelist = get_env(sp, "SLURM_STEP_NODELIST");
  if (!tasks_per_node || !nodelist) return false;
  const auto hosts = core::expand_hostlist(*nodelist, core::kMaxNodes);
  const auto counts =
      core::parse_tasks_per_node(*tasks_per_node, static_cast<std::uint32_t>(hosts.size()));
  std::uint64_t total = 0;
  for (auto c : counts) total += c;
  if (total <= get_u32(sp, S_JOB_TOTAL_TASK_COUNT, "S_JOB_TOTAL_TASK_COUNT")) return false;
  if (get_env(sp, "SLURM_HET_SIZE") || get_env(sp, "SLURM_PACK_SIZE")) return true;
  throw Error(ErrorKind::kInvalidInput,
              "this is a heterogeneous step (srun A : B) inside an allocation that is not "
              "heterogeneous: its " +
                  std::to_string(total) + " tasks (SLURM_STEP_TASKS_PER_NODE=" + *tasks_per_node +
                  ") are more than this component's " +
                  std::to_string(get_u32(sp, S_JOB_TOTAL_TASK_COUNT, "S_JOB_TOTAL_TASK_COUNT")) +
                  ", and dtrain forms het steps only in heterogeneous jobs. Fix: allocate the "
                  "components as a heterogeneous job (sbatch/salloc A : B, or srun A : B without "
                  "an allocation), or run one srun step with -w and -m arbitrary");
}

}  // namespace

void fetch_step_hosts(spank_t sp) {
  PluginState& st = state();
  try {
    if (is_het_step(sp)) {
      st.het = fetch_het_world(sp);
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
  const auto answer = ask_controller(job_id, step_id);
  if (!answer.layout) {
    throw Error(ErrorKind::kResource,
                "cannot get the layout of step " + std::to_string(job_id) + "." +
                    std::to_string(step_id) +
                    " from slurmctld (needed for -m arbitrary): " + slurm_strerror(answer.error));
  }
  return join_hosts_of_ranks(*answer.layout);
}

}  // namespace dtrain::spank
