// SPDX-License-Identifier: Apache-2.0
#include "topology/affinity_io.hpp"

#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>

#include "core/error.hpp"

namespace dtrain::topology {
namespace {

// Large enough for any kernel (CONFIG_NR_CPUS is at most 8192); grown on EINVAL regardless.
constexpr int kInitialCpus = 1024;
constexpr int kMaxCpus = 1 << 16;

struct CpuSetDeleter {
  void operator()(cpu_set_t* set) const { CPU_FREE(set); }
};
using CpuSetPtr = std::unique_ptr<cpu_set_t, CpuSetDeleter>;

CpuSetPtr allocate(int cpus) {
  CpuSetPtr set(CPU_ALLOC(static_cast<std::size_t>(cpus)));
  if (!set) throw Error(ErrorKind::kResource, "cannot allocate a CPU set");
  CPU_ZERO_S(CPU_ALLOC_SIZE(static_cast<std::size_t>(cpus)), set.get());
  return set;
}

}  // namespace

CpuList intersect_cpus(const CpuList& planned, const CpuList& allowed) {
  const CpuList a = canonical_cpu_list(planned);
  const CpuList b = canonical_cpu_list(allowed);
  CpuList both;
  std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(both));
  return both;
}

CpuList current_affinity(pid_t pid) {
  for (int cpus = kInitialCpus; cpus <= kMaxCpus; cpus *= 2) {
    CpuSetPtr set = allocate(cpus);
    const std::size_t size = CPU_ALLOC_SIZE(static_cast<std::size_t>(cpus));
    if (sched_getaffinity(pid, size, set.get()) != 0) {
      if (errno == EINVAL) continue;  // the kernel's mask is larger than ours
      throw Error(ErrorKind::kResource,
                  std::string("sched_getaffinity failed: ") + std::strerror(errno));
    }
    CpuList list;
    for (int cpu = 0; cpu < cpus; ++cpu) {
      if (CPU_ISSET_S(static_cast<std::size_t>(cpu), size, set.get())) {
        list.push_back(static_cast<unsigned>(cpu));
      }
    }
    return list;
  }
  throw Error(ErrorKind::kResource, "sched_getaffinity: the kernel's CPU mask is too large");
}

CpuList online_cpus() {
  std::ifstream in("/sys/devices/system/cpu/online");
  std::string text;
  if (!std::getline(in, text) || text.empty()) return {};
  try {
    return parse_cpu_list(text, "/sys/devices/system/cpu/online");
  } catch (const Error&) {
    return {};
  }
}

AffinityResult apply_cpu_affinity(const CpuList& planned, pid_t pid) {
  AffinityResult result;
  const CpuList allowed = current_affinity(pid);
  const CpuList cpus = intersect_cpus(planned, allowed);
  if (cpus.empty()) {
    result.cpus = allowed;
    result.warning = "none of the planned CPUs " + format_cpu_list(planned) +
                     " is available to this task (allowed: " + format_cpu_list(allowed) +
                     "); CPU affinity left unchanged. Does the topology XML describe this node?";
    return result;
  }
  const int size_cpus = std::max(kInitialCpus, static_cast<int>(cpus.back()) + 1);
  CpuSetPtr set = allocate(size_cpus);
  const std::size_t size = CPU_ALLOC_SIZE(static_cast<std::size_t>(size_cpus));
  for (unsigned cpu : cpus) CPU_SET_S(cpu, size, set.get());
  if (sched_setaffinity(pid, size, set.get()) != 0) {
    throw Error(ErrorKind::kResource, "sched_setaffinity to CPUs " + format_cpu_list(cpus) +
                                          " failed: " + std::strerror(errno));
  }
  result.applied = true;
  result.cpus = cpus;
  return result;
}

}  // namespace dtrain::topology
