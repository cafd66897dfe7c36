// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "bootstrap/peers.hpp"
#include "core/error.hpp"

namespace {

using dtrain::bootstrap::preflight_peers;

TEST(Peers, RingNeighboursAndPowerOfTwoStrides) {
  EXPECT_EQ(preflight_peers(0, 16), (std::vector<int>{1, 2, 4, 8, 12, 14, 15}));
  EXPECT_EQ(preflight_peers(3, 8), (std::vector<int>{1, 2, 4, 5, 7}));
  EXPECT_TRUE(preflight_peers(0, 1).empty());
  EXPECT_EQ(preflight_peers(1, 2), (std::vector<int>{0}));
}

TEST(Peers, LogarithmicSymmetricAndEveryRankIsChecked) {
  for (int size = 1; size <= 130; ++size) {
    const auto limit = static_cast<std::size_t>(2 * std::ceil(std::log2(std::max(size, 2))));
    std::vector<int> checked_by(static_cast<std::size_t>(size), 0);
    for (int rank = 0; rank < size; ++rank) {
      const auto peers = preflight_peers(rank, size);
      EXPECT_LE(peers.size(), limit) << "size " << size;
      EXPECT_TRUE(std::is_sorted(peers.begin(), peers.end()));
      for (int peer : peers) {
        EXPECT_NE(peer, rank);
        const auto back = preflight_peers(peer, size);
        EXPECT_TRUE(std::binary_search(back.begin(), back.end(), rank))
            << rank << " probes " << peer << " but not back, size " << size;
        ++checked_by[static_cast<std::size_t>(peer)];
      }
    }
    if (size > 1) {
      EXPECT_EQ(std::count(checked_by.begin(), checked_by.end(), 0), 0) << "size " << size;
    }
  }
}

TEST(Peers, ScalesToLargeJobs) {
  EXPECT_LE(preflight_peers(12345, 100000).size(), 34u);
}

TEST(Peers, RefusesARankOutsideTheWorld) {
  EXPECT_THROW(preflight_peers(4, 4), dtrain::Error);
  EXPECT_THROW(preflight_peers(-1, 4), dtrain::Error);
}

}  // namespace
