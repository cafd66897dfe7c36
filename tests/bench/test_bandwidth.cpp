// SPDX-License-Identifier: Apache-2.0
// busbw maths against hand-computed values (nccl-tests' GetBw and GetCollByteCount).
#include <gtest/gtest.h>

#include "bench/collectives/collective.hpp"

namespace {

using namespace dtrain::bootstrap::collectives;

// 1 MiB of floats per call for 1 ms on 8 ranks: 4 194 304 B / 1e9 / 1e-3 = 4.194304 GB/s.
constexpr double kSeconds = 1e-3;

TEST(Bandwidth, AllReduceIsTwiceNMinusOneOverN) {
  const auto bw = all_reduce_test().bandwidth(1 << 20, 4, kSeconds, 8);
  EXPECT_DOUBLE_EQ(bw.algbw, 4.194304);
  EXPECT_DOUBLE_EQ(bw.busbw, 4.194304 * 14.0 / 8.0);  // 7.340032
}

TEST(Bandwidth, AllGatherCountsTheWholeGatheredBuffer) {
  const auto counts = all_gather_test().counts(1 << 20, 8);
  EXPECT_EQ(counts.param_count, 131072u);
  EXPECT_EQ(counts.send_count, 131072u);
  EXPECT_EQ(counts.recv_count, 1u << 20);
  EXPECT_EQ(counts.send_inplace_offset, 131072u);
  const auto bw = all_gather_test().bandwidth(counts.param_count, 4, kSeconds, 8);
  EXPECT_DOUBLE_EQ(bw.algbw, 4.194304);
  EXPECT_DOUBLE_EQ(bw.busbw, 3.670016);
}

TEST(Bandwidth, ReduceScatterCountsTheWholeInput) {
  const auto counts = reduce_scatter_test().counts(1 << 20, 8);
  EXPECT_EQ(counts.param_count, 131072u);
  EXPECT_EQ(counts.send_count, 1u << 20);
  EXPECT_EQ(counts.recv_inplace_offset, 131072u);
  const auto bw = reduce_scatter_test().bandwidth(counts.param_count, 4, kSeconds, 8);
  EXPECT_DOUBLE_EQ(bw.algbw, 4.194304);
  EXPECT_DOUBLE_EQ(bw.busbw, 3.670016);
}

TEST(Bandwidth, AllToAllIsNMinusOneOverN) {
  const auto counts = alltoall_test().counts(1 << 20, 8);
  EXPECT_EQ(counts.param_count, 131072u);
  EXPECT_EQ(counts.send_count, 1u << 20);
  const auto bw = alltoall_test().bandwidth(counts.param_count, 4, kSeconds, 8);
  EXPECT_DOUBLE_EQ(bw.algbw, 4.194304);
  EXPECT_DOUBLE_EQ(bw.busbw, 3.670016);
}

TEST(Bandwidth, RootedAndPointToPointAreOneToOne) {
  for (const auto* test : {&broadcast_test(), &reduce_test(), &sendrecv_test()}) {
    const auto bw = test->bandwidth(1 << 20, 4, kSeconds, 8);
    EXPECT_DOUBLE_EQ(bw.algbw, 4.194304) << test->name;
    EXPECT_DOUBLE_EQ(bw.busbw, 4.194304) << test->name;
  }
}

TEST(Bandwidth, SingleRankHasNoBusTraffic) {
  EXPECT_DOUBLE_EQ(all_reduce_test().bandwidth(1000, 8, 1.0, 1).busbw, 0.0);
  EXPECT_DOUBLE_EQ(all_gather_test().bandwidth(1000, 8, 1.0, 1).busbw, 0.0);
}

TEST(Bandwidth, UnevenSizesRoundDownToWholeBlocks) {
  // 10 elements over 3 ranks: blocks of 3, 9 elements moved (as nccl-tests).
  const auto counts = all_gather_test().counts(10, 3);
  EXPECT_EQ(counts.param_count, 3u);
  EXPECT_EQ(counts.recv_count, 9u);
}

TEST(Registry, FindsEveryCollectiveByItsFlagName) {
  for (const char* name : {"all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce",
                           "alltoall", "sendrecv"}) {
    ASSERT_NE(find_collective_test(name), nullptr) << name;
  }
  EXPECT_EQ(find_collective_test("allreduce"), nullptr);
  EXPECT_EQ(all_collective_tests().size(), 7u);
}

}  // namespace
