#include "spank/slurmstepd_controller.hpp"

#include <slurm/slurm.h>

#include <memory>
#include <vector>

#include "core/error.hpp"
#include "core/hostlist.hpp"
#include "core/layout.hpp"
#include "spank/spank_io.hpp"
#include "spank/state.hpp"

namespace dtrain::spank {

void fetch_arbitrary_hosts(spank_t sp) {
  PluginState& st = state();
  const auto distribution =
      core::parse_distribution(get_env(sp, "SLURM_DISTRIBUTION").value_or(""),
                               get_env(sp, "SLURM_DIST_PLANESIZE").value_or(""));
  if (distribution.kind != core::DistributionKind::kArbitrary) return;
  try {
    st.arbitrary_hosts = arbitrary_hosts_from_controller(get_u32(sp, S_JOB_ID, "S_JOB_ID"),
                                                         get_u32(sp, S_JOB_STEPID, "S_JOB_STEPID"));
  } catch (const std::exception& e) {
    st.arbitrary_hosts_error = e.what();
  }
}

std::string arbitrary_hosts_from_controller(std::uint32_t job_id, std::uint32_t step_id) {
  slurm_step_id_t id{};
  id.job_id = job_id;
  id.step_id = step_id;
  id.step_het_comp = NO_VAL;
  std::unique_ptr<slurm_step_layout_t, decltype(&slurm_job_step_layout_free)> layout(
      slurm_job_step_layout_get(&id), &slurm_job_step_layout_free);
  if (!layout || !layout->node_list || !layout->tasks || !layout->tids) {
    throw Error(ErrorKind::kResource, "cannot get the layout of step " + std::to_string(job_id) +
                                          "." + std::to_string(step_id) +
                                          " from slurmctld (needed for -m arbitrary)");
  }
  const auto hosts = core::expand_hostlist(layout->node_list, layout->node_cnt);
  if (hosts.size() != layout->node_cnt || layout->task_cnt > core::kMaxTasks) {
    throw Error(ErrorKind::kMismatch, "slurmctld returned an inconsistent step layout");
  }
  std::vector<const std::string*> host_of_rank(layout->task_cnt, nullptr);
  for (std::uint32_t node = 0; node < layout->node_cnt; ++node) {
    for (std::uint32_t i = 0; i < layout->tasks[node]; ++i) {
      const std::uint32_t rank = layout->tids[node][i];
      if (rank >= host_of_rank.size()) {
        throw Error(ErrorKind::kMismatch, "slurmctld returned task id " + std::to_string(rank) +
                                              " outside the step's " +
                                              std::to_string(layout->task_cnt) + " tasks");
      }
      host_of_rank[rank] = &hosts[node];
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

}  // namespace dtrain::spank
