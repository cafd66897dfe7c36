// SPDX-License-Identifier: Apache-2.0
#include "sim_memory.hpp"

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>

namespace dtrain::bootstrap::sim {

namespace {

struct Usage {
  std::uint64_t live;
  std::uint64_t peak;
};

// Plain malloc'd storage: the accounting must not allocate through operator new itself.
Usage* g_usage = nullptr;
int g_ranks = 0;
thread_local int g_owner = -1;

// Every block starts with its owner and size, padded to keep the caller's alignment.
struct alignas(std::max_align_t) Header {
  int owner;
  std::size_t size;
};

void* allocate(std::size_t size) {
  auto* header = static_cast<Header*>(std::malloc(sizeof(Header) + size));
  if (header == nullptr) throw std::bad_alloc();
  header->owner = g_owner;
  header->size = size;
  if (g_usage != nullptr && g_owner >= 0 && g_owner < g_ranks) {
    Usage& usage = g_usage[g_owner];
    usage.live += size;
    if (usage.live > usage.peak) usage.peak = usage.live;
  }
  return header + 1;
}

void deallocate(void* pointer) noexcept {
  if (pointer == nullptr) return;
  Header* header = static_cast<Header*>(pointer) - 1;
  if (g_usage != nullptr && header->owner >= 0 && header->owner < g_ranks) {
    g_usage[header->owner].live -= header->size;
  }
  std::free(header);
}

}  // namespace

void track_memory(int ranks) {
  stop_tracking_memory();
  g_usage = static_cast<Usage*>(std::calloc(static_cast<std::size_t>(ranks), sizeof(Usage)));
  if (g_usage == nullptr) throw std::bad_alloc();
  g_ranks = ranks;
}

void stop_tracking_memory() {
  Usage* usage = g_usage;
  g_usage = nullptr;
  g_ranks = 0;
  std::free(usage);
}

std::uint64_t peak_bytes(int rank) {
  return g_usage != nullptr && rank < g_ranks ? g_usage[rank].peak : 0;
}

std::uint64_t live_bytes(int rank) {
  return g_usage != nullptr && rank < g_ranks ? g_usage[rank].live : 0;
}

OwnerScope::OwnerScope(int rank) : previous_(g_owner) {
  g_owner = rank;
}

OwnerScope::~OwnerScope() {
  g_owner = previous_;
}

}  // namespace dtrain::bootstrap::sim

// The replaceable global allocation functions (the aligned forms keep the library's own).
void* operator new(std::size_t size) {
  return dtrain::bootstrap::sim::allocate(size);
}
void* operator new[](std::size_t size) {
  return dtrain::bootstrap::sim::allocate(size);
}
void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  try {
    return dtrain::bootstrap::sim::allocate(size);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t size, const std::nothrow_t&) noexcept {
  try {
    return dtrain::bootstrap::sim::allocate(size);
  } catch (...) {
    return nullptr;
  }
}
void operator delete(void* pointer) noexcept {
  dtrain::bootstrap::sim::deallocate(pointer);
}
void operator delete[](void* pointer) noexcept {
  dtrain::bootstrap::sim::deallocate(pointer);
}
void operator delete(void* pointer, std::size_t) noexcept {
  dtrain::bootstrap::sim::deallocate(pointer);
}
void operator delete[](void* pointer, std::size_t) noexcept {
  dtrain::bootstrap::sim::deallocate(pointer);
}
void operator delete(void* pointer, const std::nothrow_t&) noexcept {
  dtrain::bootstrap::sim::deallocate(pointer);
}
void operator delete[](void* pointer, const std::nothrow_t&) noexcept {
  dtrain::bootstrap::sim::deallocate(pointer);
}
