// SPDX-License-Identifier: Apache-2.0
#pragma once
// The fault hint's pipe (core/fault_hint.hpp), with node_check=on. slurmstepd opens it before it
// forks the step's tasks (user_init), each task gets its write end as DTRAIN_FAULT_HINT_FD
// (task_init), and slurmstepd, as root, reads what the tasks wrote once they all ended
// (slurm_spank_exit) and keeps the valid lines in a root-only file for the job's epilog.
//
// Why a pipe that slurmstepd holds: a task's hint must reach root without root opening anything
// the job can name or replace. The pipe's buffer bounds what a job can write (a full pipe makes
// its writes fail with EAGAIN, never block), nothing lands on a disk, and root reads it without
// following any path.

#include "spank/spank_api.hpp"

namespace dtrain::spank {

// slurmstepd, before the tasks are forked. Throws dtrain::Error when no pipe can be made.
void open_fault_hint_pipe();

// In each task, before exec: exports the write end's number and closes the read end.
void export_fault_hint_fd(spank_t sp);

// slurmstepd, as root, after the step's tasks ended. Throws dtrain::Error naming what failed.
void keep_fault_hints(spank_t sp);

}  // namespace dtrain::spank
