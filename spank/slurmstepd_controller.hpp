#pragma once
// slurmstepd, as the user: the one RPC dtrain makes to slurmctld.

#include <cstdint>
#include <string>

namespace dtrain::spank {

// The host of every rank of the step in rank order ("node2,node1,..."), asked from slurmctld:
// only -m arbitrary needs it, since its placement is not in the step's environment.
std::string arbitrary_hosts_from_controller(std::uint32_t job_id, std::uint32_t step_id);

}  // namespace dtrain::spank
