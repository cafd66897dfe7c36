// SPDX-License-Identifier: Apache-2.0
#pragma once
// CPU lists: PU os indexes (the Linux CPU numbers used by sched_setaffinity and taskset),
// kept ascending and unique, and their compact text form "0-13,112-125".

#include <string>
#include <string_view>
#include <vector>

namespace dtrain::topology {

using CpuList = std::vector<unsigned>;

std::string format_cpu_list(const CpuList& cpus);

// Parses "0-3,8,10-11" (the kernel's cpulist format). Throws kInvalidInput naming `what`.
CpuList parse_cpu_list(std::string_view text, std::string_view what);

// Sorts and removes duplicates.
CpuList canonical_cpu_list(CpuList cpus);

}  // namespace dtrain::topology
