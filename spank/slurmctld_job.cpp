// SPDX-License-Identifier: Apache-2.0
#include "spank/slurmctld_job.hpp"

namespace dtrain::spank {
namespace {

constexpr std::uint16_t kShowAll = 1;  // SHOW_ALL: jobs in hidden partitions too

}  // namespace

JobInfo load_job_info(std::uint32_t job_id) {
  job_info_msg_t* info = nullptr;
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(26, 5, 0)
  slurm_step_id_t id{};
  id.job_id = job_id;
  id.step_id = NO_VAL;
  id.step_het_comp = NO_VAL;
  const int rc = slurm_load_job(&info, id, kShowAll);
#else
  const int rc = slurm_load_job(&info, job_id, kShowAll);
#endif
  JobInfo owned(info, &slurm_free_job_info_msg);
  if (rc != SLURM_SUCCESS || !owned || !owned->job_array)
    return JobInfo(nullptr, &slurm_free_job_info_msg);
  return owned;
}

const slurm_job_info_t* find_job(const JobInfo& info, std::uint32_t job_id) {
  if (!info) return nullptr;
  for (std::uint32_t i = 0; i < info->record_count; ++i) {
    if (info->job_array[i].job_id == job_id) return &info->job_array[i];
  }
  return nullptr;
}

}  // namespace dtrain::spank
