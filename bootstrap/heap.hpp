// SPDX-License-Identifier: Apache-2.0
#pragma once
// How freed memory goes back to the operating system.
//
// MPI libraries allocate scratch buffers inside collective calls: Open MPI's allreduce
// (reduce-scatter + allgather) mallocs a buffer as large as the message on every call. glibc
// serves anything above 32 MiB (the ceiling of its adaptive mmap threshold) with mmap and hands
// it back with munmap on free, so every call page-faults the whole buffer again; at 32-64 MB
// this is a third of the call's time. Serving all allocations from the heap and never trimming
// it keeps those pages resident from one call to the next; GASNet (GASNET_DISABLE_MUNMAP) and
// PSM2 (HFI_DISABLE_MMAP_MALLOC) offer the same two glibc settings for the same reason. The
// price is that the process's resident size stays at its peak.

#include <optional>

#include "bootstrap/environment.hpp"

namespace dtrain::bootstrap {

// Default on; DTRAIN_KEEP_FREED_MEMORY=0 or 1 overrides it; an explicit config value overrides
// both. Throws dtrain::Error naming the variable when its value is not 0 or 1.
bool resolve_keep_freed_memory(std::optional<bool> configured, const EnvLookup& lookup);

// Tells glibc's malloc never to use mmap for an allocation and never to trim the heap. Returns
// false where the allocator ignores the request (sanitizer runtimes, other allocators).
bool keep_freed_memory_in_heap() noexcept;

}  // namespace dtrain::bootstrap
