// SPDX-License-Identifier: Apache-2.0
#include "topology/cpu_list.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "core/parse.hpp"

namespace dtrain::topology {
namespace {
// Linux supports at most 8192 CPUs (CONFIG_NR_CPUS); anything larger is a typo.
constexpr unsigned kMaxCpuIndex = 8191;
}  // namespace

std::string format_cpu_list(const CpuList& cpus) {
  std::string text;
  std::size_t i = 0;
  while (i < cpus.size()) {
    std::size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!text.empty()) text += ',';
    text += std::to_string(cpus[i]);
    if (j > i) text += '-' + std::to_string(cpus[j]);
    i = j + 1;
  }
  return text;
}

CpuList parse_cpu_list(std::string_view text, std::string_view what) {
  core::require_length(text, what);
  CpuList cpus;
  if (text.empty()) return cpus;
  for (std::string_view item : core::split(text, ',')) {
    const auto bounds = core::split(item, '-');
    if (bounds.size() > 2) {
      throw_invalid(std::string(what) + ": " + core::quote_for_error(item) +
                    " is not a CPU number or range like 0-13");
    }
    const auto first =
        static_cast<unsigned>(core::parse_unsigned(bounds[0], what, 0, kMaxCpuIndex));
    const auto last =
        bounds.size() == 2
            ? static_cast<unsigned>(core::parse_unsigned(bounds[1], what, 0, kMaxCpuIndex))
            : first;
    if (last < first) {
      throw_invalid(std::string(what) + ": range " + core::quote_for_error(item) +
                    " runs backwards; write it as low-high");
    }
    for (unsigned cpu = first; cpu <= last; ++cpu) cpus.push_back(cpu);
  }
  return canonical_cpu_list(std::move(cpus));
}

CpuList canonical_cpu_list(CpuList cpus) {
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return cpus;
}

}  // namespace dtrain::topology
