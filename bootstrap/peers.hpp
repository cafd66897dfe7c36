// SPDX-License-Identifier: Apache-2.0
#pragma once
// Which peers a rank probes in the connectivity preflight: rank±1, ±2, ±4, ... (mod size).
// O(log n) peers per rank, and symmetric: j probes i exactly when i probes j, so every rank's
// endpoint is tried by its ring neighbours at least.

#include <vector>

namespace dtrain::bootstrap {

// Sorted, without duplicates and without `rank` itself. Empty for size 1.
std::vector<int> preflight_peers(int rank, int size);

}  // namespace dtrain::bootstrap
