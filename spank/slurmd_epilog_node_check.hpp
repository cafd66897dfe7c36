// SPDX-License-Identifier: Apache-2.0
#pragma once
// slurmd's job epilog (`slurmstepd spank epilog`, as root, on every node of a job that ended):
// with node_check=on in plugstack.conf, this node checks its own fabric link
// (core/node_check.hpp) and, when a fault hint of the job names this node (core/fault_hint.hpp),
// whether it reaches the job's other nodes over the fabric. When a check fails it drains itself
// through slurmctld with a reason that starts with "dtrain: ", unless the node already has a
// reason. The hint, the only thing it reads that a job wrote, chooses the deeper check and is
// logged with its outcome ("did not reproduce", "confirmed"); it never drains a node by itself.

namespace dtrain::spank {

// Always 0: Slurm drains a node whose epilog fails, for whatever reason, and that decision must
// rest on the node check alone, never on an error of dtrain's.
int run_epilog_node_check(int ac, char** av) noexcept;

}  // namespace dtrain::spank
