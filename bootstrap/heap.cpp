// SPDX-License-Identifier: Apache-2.0
#include "bootstrap/heap.hpp"

#include <malloc.h>

#include "core/parse.hpp"

namespace dtrain::bootstrap {

bool resolve_keep_freed_memory(std::optional<bool> configured, const EnvLookup& lookup) {
  if (configured) return *configured;
  if (const auto text = lookup("DTRAIN_KEEP_FREED_MEMORY")) {
    return core::parse_unsigned(*text, "DTRAIN_KEEP_FREED_MEMORY (0 or 1)", 0, 1) == 1;
  }
  return true;
}

bool keep_freed_memory_in_heap() noexcept {
  // glibc's mallopt returns 1 on success; -1 as the trim threshold means "never".
  const bool no_mmap = mallopt(M_MMAP_MAX, 0) == 1;
  const bool no_trim = mallopt(M_TRIM_THRESHOLD, -1) == 1;
  return no_mmap && no_trim;
}

}  // namespace dtrain::bootstrap
