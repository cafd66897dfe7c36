// SPDX-License-Identifier: Apache-2.0
#pragma once
// slurmstepd, as root before it becomes the job's user: the one RPC dtrain makes to slurmctld.
// Not later: Slurm 25.11's slurmstepd runs user_init holding its authentication lock (22.05's
// does not), and an RPC from there aborts slurmstepd ("fatal: auth_g_create:
// pthread_rwlock_rdlock(): Resource deadlock avoided").

#include <cstdint>
#include <string>

#include "spank/spank_api.hpp"

namespace dtrain::spank {

// init_post_opt: for a step laid out with -m arbitrary, or a heterogeneous step (srun A : B),
// stores the hosts of its ranks (or why slurmctld did not give them) in state() for plan_node;
// other steps need nothing. A het step costs one request per component on every node.
void fetch_step_hosts(spank_t sp);

// The host of every rank of the step in rank order ("node2,node1,..."), asked from slurmctld:
// only -m arbitrary needs it, since its placement is not in the step's environment.
std::string arbitrary_hosts_from_controller(std::uint32_t job_id, std::uint32_t step_id);

}  // namespace dtrain::spank
