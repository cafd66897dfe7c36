// SPDX-License-Identifier: Apache-2.0
#pragma once
// slurmstepd, as root, in task_exit: a node that refused the step ends it on every node.
//
// A refusal in user_init (a port of the step held by another user, a loopback address, a name
// that does not resolve, a layout that disagrees with Slurm's, a step too busy for its ports)
// stops this node's tasks before their program starts (task_init), but the other nodes cannot
// tell: their tasks would run the program and wait for this node's ranks until the framework's
// rendezvous timeout. So the refusing node asks slurmctld to cancel the step, as srun does when a
// launch fails (step_launch.c, slurm_step_launch_wait_finish) and as Slurm's own plugins in
// slurmstepd do to keep the other nodes' tasks from hanging (mpi/pmi2's pmi1.c and tree.c;
// task/cgroup's OOMKillStep). Why here and not in user_init: slurmstepd runs user_init with the
// job's user's privileges, and Slurm 23.02 and later hold the authentication lock for as long as
// they are dropped, also in the forked tasks (auth.c, auth_setuid_lock; privileges.c), so an
// RPC from user_init or task_init aborts slurmstepd or the task. task_exit runs in slurmstepd
// with its privileges back, when this node's first task has ended (in task_init, before exec),
// which is after slurmstepd sent srun its launch response (mgr.c, job_manager): cancelled earlier,
// in task_post_fork, srun saw a het step aborted before it was completely launched and took 10 s
// more to return.

#include "spank/spank_api.hpp"

namespace dtrain::spank {

// Cost: a node cannot tell whether the others refused too, and slurmctld signals all the step's
// nodes for every cancel (stepmgr.c, _step_signal and signal_step_tasks), so a step refused on
// every node (a setting wrong everywhere) would cost N cancels and N fan-outs of N nodes. Node 0
// of the step therefore cancels at once; node i waits i * 50 ms more (at most 30 s) and first
// asks slurmctld whether the step is still there (one small request), which it is not once an
// earlier cancel, or every task's own end, completed it. A step refused on one node only ends
// after at most that node's wait. Het steps skip the question: their components' steps are not
// named by one job id.
//
// Asks slurmctld, once per node, to cancel the step this node refused (SIGKILL to every task);
// in a het step the request names component 0's job, and slurmctld ends the step in every
// component. Never throws; a failed request is logged with what the user can do instead.
void end_refused_step(spank_t sp) noexcept;

}  // namespace dtrain::spank
