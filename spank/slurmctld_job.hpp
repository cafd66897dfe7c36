// SPDX-License-Identifier: Apache-2.0
#pragma once
// One job's record as slurmctld has it (slurm_load_job), for the callers that must not take a
// job's facts from its environment: slurmstepd as root (a het step's leader) and the epilog's
// node check (the job's nodes). The call's signature changed in Slurm 26.05.

#include <slurm/slurm.h>

#include <cstdint>
#include <memory>

namespace dtrain::spank {

using JobInfo = std::unique_ptr<job_info_msg_t, decltype(&slurm_free_job_info_msg)>;

// The records slurmctld returns for `job_id` (all components of a het job's component 0), or an
// empty pointer when it cannot be asked or knows no such job; errno then holds libslurm's code.
JobInfo load_job_info(std::uint32_t job_id);

// The record of `job_id` itself in `info`, or nullptr.
const slurm_job_info_t* find_job(const JobInfo& info, std::uint32_t job_id);

}  // namespace dtrain::spank
