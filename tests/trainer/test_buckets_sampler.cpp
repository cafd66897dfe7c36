// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>

#include "core/error.hpp"
#include "trainer/buckets.hpp"
#include "trainer/sampler.hpp"

namespace dtrain::trainer {
namespace {

std::vector<TensorRange> contiguous(const std::vector<std::size_t>& counts) {
  std::vector<TensorRange> tensors;
  std::size_t offset = 0;
  for (std::size_t c : counts) {
    tensors.push_back({offset, c});
    offset += c;
  }
  return tensors;
}

TEST(Buckets, ReverseOrderClosedOnceCapReached) {
  // Floats: 100, 10, 300, 20, 50 -> bytes 400, 40, 1200, 80, 200 ; cap 240 bytes.
  const auto buckets = assign_buckets(contiguous({100, 10, 300, 20, 50}), 240);
  ASSERT_EQ(buckets.size(), 3u);
  EXPECT_EQ(buckets[0].tensors, (std::vector<std::size_t>{4, 3}));  // 200 + 80 >= 240
  EXPECT_EQ(buckets[1].tensors, (std::vector<std::size_t>{2}));     // 1200 alone
  EXPECT_EQ(buckets[2].tensors, (std::vector<std::size_t>{1, 0}));  // the rest
  EXPECT_EQ(buckets[0].offset, 410u);
  EXPECT_EQ(buckets[0].count, 70u);
  EXPECT_EQ(buckets[2].offset, 0u);
  EXPECT_EQ(buckets[2].count, 110u);
}

TEST(Buckets, CoverEveryFloatExactlyOnce) {
  const ParamLayout layout(MlpShape{{64, 128, 128, 128, 10}});
  for (std::size_t cap :
       {std::size_t{1}, std::size_t{4096}, std::size_t{70000}, std::size_t{1} << 30}) {
    const auto buckets = assign_buckets(layout.tensors(), cap);
    std::vector<int> covered(layout.total(), 0);
    for (const Bucket& b : buckets) {
      for (std::size_t k = b.offset; k < b.offset + b.count; ++k) ++covered[k];
    }
    EXPECT_TRUE(std::all_of(covered.begin(), covered.end(), [](int c) { return c == 1; }))
        << "cap " << cap;
    if (cap == (std::size_t{1} << 30)) {
      EXPECT_EQ(buckets.size(), 1u);
    }
    if (cap == 1) {
      EXPECT_EQ(buckets.size(), layout.tensors().size());
    }
  }
}

TEST(Buckets, TrackerReleasesInIndexOrderOnly) {
  const auto buckets = assign_buckets(contiguous({10, 10, 10, 10}), 80);  // {3,2} {1,0}
  ASSERT_EQ(buckets.size(), 2u);
  BucketTracker tracker(buckets, 4);
  EXPECT_TRUE(tracker.mark_ready(0).empty());  // bucket 1 incomplete and bucket 0 not yet out
  EXPECT_TRUE(tracker.mark_ready(1).empty());  // bucket 1 complete but waits for bucket 0
  EXPECT_TRUE(tracker.mark_ready(3).empty());
  EXPECT_EQ(tracker.mark_ready(2), (std::vector<std::size_t>{0, 1}));
  EXPECT_TRUE(tracker.all_launched());
  EXPECT_THROW(tracker.mark_ready(2), Error);
  tracker.reset();
  EXPECT_FALSE(tracker.all_launched());
}

SamplerSpec spec(std::uint64_t n, std::uint64_t world, std::uint64_t batch,
                 bool drop_last = false) {
  return SamplerSpec{n, world, batch, 42, true, drop_last};
}

TEST(Sampler, ShardsAreDisjointAndCoverTheSet) {
  const SamplerSpec s = spec(1000, 4, 10);
  std::set<std::uint64_t> seen;
  for (std::uint64_t r = 0; r < 4; ++r) {
    const auto shard = rank_shard(s, 3, r);
    EXPECT_EQ(shard.size(), 250u);
    for (std::uint64_t i : shard) EXPECT_TRUE(seen.insert(i).second) << "index " << i << " twice";
  }
  EXPECT_EQ(seen.size(), 1000u);
}

TEST(Sampler, PadsByRepeatingTheFirstIndices) {
  const SamplerSpec s = spec(10, 4, 1);
  EXPECT_EQ(shard_size(s), 3u);
  const auto order = epoch_order(s, 0);
  ASSERT_EQ(order.size(), 12u);
  EXPECT_EQ(order[10], order[0]);
  EXPECT_EQ(order[11], order[1]);
  EXPECT_EQ(std::set<std::uint64_t>(order.begin(), order.begin() + 10).size(), 10u);
}

TEST(Sampler, DropLastTruncates) {
  const SamplerSpec s = spec(10, 4, 1, true);
  EXPECT_EQ(shard_size(s), 2u);
  const auto order = epoch_order(s, 0);
  EXPECT_EQ(order.size(), 8u);
  EXPECT_EQ(std::set<std::uint64_t>(order.begin(), order.end()).size(), 8u);
}

TEST(Sampler, DeterministicPerEpochAndReshuffledAcrossEpochs) {
  const SamplerSpec s = spec(500, 2, 5);
  EXPECT_EQ(rank_shard(s, 1, 0), rank_shard(s, 1, 0));
  EXPECT_NE(rank_shard(s, 1, 0), rank_shard(s, 2, 0));
  SamplerSpec other_seed = s;
  other_seed.seed = 43;
  EXPECT_NE(rank_shard(s, 1, 0), rank_shard(other_seed, 1, 0));
}

TEST(Sampler, GlobalBatchIsAConsecutiveSliceOfTheOrder) {
  const SamplerSpec s = spec(96, 4, 3);
  const auto order = epoch_order(s, 5);
  const std::vector<std::uint64_t> all = {0, 1, 2, 3};
  for (std::uint64_t step = 0; step < steps_per_epoch(s); ++step) {
    auto global = step_indices(s, order, step, all);
    auto expected =
        std::vector<std::uint64_t>(order.begin() + static_cast<std::ptrdiff_t>(step * 12),
                                   order.begin() + static_cast<std::ptrdiff_t>(step * 12 + 12));
    std::sort(global.begin(), global.end());
    std::sort(expected.begin(), expected.end());
    EXPECT_EQ(global, expected) << "step " << step;
    // ... and a single process with the global batch sees the same samples when N % world == 0.
    const SamplerSpec single = SamplerSpec{96, 1, 12, 42, true, false};
    auto alone = step_indices(single, epoch_order(single, 5), step, std::vector<std::uint64_t>{0});
    std::sort(alone.begin(), alone.end());
    EXPECT_EQ(alone, expected);
  }
}

TEST(Sampler, RankBatchesMatchTheirShard) {
  const SamplerSpec s = spec(103, 3, 4);
  const auto order = epoch_order(s, 0);
  for (std::uint64_t r = 0; r < 3; ++r) {
    const auto shard = rank_shard(s, 0, r);
    std::vector<std::uint64_t> concatenated;
    for (std::uint64_t step = 0; step < steps_per_epoch(s); ++step) {
      const auto batch = step_indices(s, order, step, std::vector<std::uint64_t>{r});
      concatenated.insert(concatenated.end(), batch.begin(), batch.end());
    }
    EXPECT_TRUE(std::equal(concatenated.begin(), concatenated.end(), shard.begin()));
  }
}

TEST(Sampler, RefusesShardsSmallerThanABatch) {
  EXPECT_THROW(validate(spec(10, 4, 5)), Error);
  EXPECT_NO_THROW(validate(spec(10, 4, 3)));
}

}  // namespace
}  // namespace dtrain::trainer
