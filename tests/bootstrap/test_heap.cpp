// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>
#include <malloc.h>

#include <cstdlib>
#include <cstring>

#include "bootstrap/heap.hpp"

namespace {

using dtrain::bootstrap::keep_freed_memory_in_heap;

// Larger than glibc's largest dynamic mmap threshold (32 MiB), like the scratch buffer Open
// MPI's allreduce allocates for a 64 MB message.
constexpr std::size_t kLarge = std::size_t{64} << 20;

TEST(Heap, LargeBlocksComeFromTheHeapAndStayThereAfterFree) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "the AddressSanitizer allocator ignores mallopt";
#else
  ASSERT_TRUE(keep_freed_memory_in_heap());
  const auto mapped_before = mallinfo2().hblkhd;
  void* block = std::malloc(kLarge);
  ASSERT_NE(block, nullptr);
  std::memset(block, 1, kLarge);
  // Not an mmap of its own: the bytes held in mmapped chunks did not grow.
  EXPECT_EQ(mallinfo2().hblkhd, mapped_before);
  const auto heap_with_block = mallinfo2().arena;
  std::free(block);
  // Not trimmed: the heap the block came from is still the process's.
  EXPECT_EQ(mallinfo2().arena, heap_with_block);
  EXPECT_GE(mallinfo2().fordblks, kLarge);
#endif
}

}  // namespace
