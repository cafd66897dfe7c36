// SPDX-License-Identifier: Apache-2.0
#pragma once
// Applies a planned CPU list to a task. Uses sched_setaffinity, not hwloc_set_cpubind: the
// plan may come from a site XML, and hwloc refuses to bind with a topology it does not
// consider this system (and the XML may even describe CPUs this host lacks).

#include <sys/types.h>

#include <string>

#include "topology/cpu_list.hpp"

namespace dtrain::topology {

// The planned CPUs the task is allowed to run on, ascending. Pure.
CpuList intersect_cpus(const CpuList& planned, const CpuList& allowed);

// The CPUs `pid` (0: the calling thread) may run on. Throws Error(kResource) on failure.
CpuList current_affinity(pid_t pid = 0);

// The machine's online CPUs (/sys/devices/system/cpu/online); empty when unreadable.
CpuList online_cpus();

struct AffinityResult {
  bool applied = false;
  CpuList cpus;         // the affinity in force afterwards
  std::string warning;  // why the plan was not applied; empty when it was
};

// Restricts `pid` to intersect_cpus(planned, current_affinity(pid)). An empty intersection
// (the cgroup or the host does not have those CPUs) leaves the affinity unchanged and returns
// a warning. Throws Error(kResource) when the kernel refuses.
AffinityResult apply_cpu_affinity(const CpuList& planned, pid_t pid = 0);

}  // namespace dtrain::topology
