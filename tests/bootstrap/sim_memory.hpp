// SPDX-License-Identifier: Apache-2.0
#pragma once
// Heap accounting per simulated rank: a program that links sim_memory.cpp replaces the global
// operator new and delete, and every allocation made while an OwnerScope for rank r is active
// counts for r (live and peak bytes), until it is freed, wherever that happens. The simulation
// runs each rank's protocol inside its rank's scope and copies a message into the receiver's
// scope when it is delivered, as a real transport would.

#include <cstdint>
#include <vector>

namespace dtrain::bootstrap::sim {

// Starts (or restarts) the accounting for `ranks` ranks, every count at zero.
void track_memory(int ranks);
// Stops the accounting.
void stop_tracking_memory();
std::uint64_t peak_bytes(int rank);
std::uint64_t live_bytes(int rank);

class OwnerScope {
 public:
  explicit OwnerScope(int rank);
  ~OwnerScope();
  OwnerScope(const OwnerScope&) = delete;
  OwnerScope& operator=(const OwnerScope&) = delete;

 private:
  int previous_;
};

}  // namespace dtrain::bootstrap::sim
