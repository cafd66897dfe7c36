// SPDX-License-Identifier: Apache-2.0
// Deterministic data and expected results; half/bfloat16 conversions.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "bench/collectives/collective.hpp"
#include "bootstrap/half.hpp"

namespace {

using namespace dtrain::bootstrap;
using namespace dtrain::bootstrap::collectives;

TEST(Half, RoundTripsSmallIntegersAndRoundsToNearestEven) {
  for (int i = -2048; i <= 2048; ++i) {
    EXPECT_EQ(half_to_float(float_to_half(static_cast<float>(i))), static_cast<float>(i)) << i;
  }
  EXPECT_EQ(float_to_half(1.0f), 0x3c00);
  EXPECT_EQ(float_to_half(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_half(1e6f), 0x7c00);                         // overflow to infinity
  EXPECT_EQ(float_to_half(2049.0f), float_to_half(2048.0f));      // tie goes to even
  EXPECT_FLOAT_EQ(half_to_float(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -24)), 0x0001);
}

TEST(BFloat16, RoundTripsSmallIntegersAndRoundsToNearestEven) {
  for (int i = -256; i <= 256; ++i) {
    EXPECT_EQ(bf16_to_float(float_to_bf16(static_cast<float>(i))), static_cast<float>(i)) << i;
  }
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(bf16_to_float(float_to_bf16(257.0f)), 256.0f);  // tie to even
  EXPECT_EQ(bf16_to_float(float_to_bf16(259.0f)), 260.0f);
}

TEST(Data, SumsStayExactInEveryTypeForManyRanks) {
  for (DataType type : {DataType::kBFloat16, DataType::kFloat16, DataType::kFloat32}) {
    for (int nranks : {2, 8, 64, 256}) {
      for (std::size_t i = 0; i < 64; ++i) {
        const double sum = expected_reduction(type, ReduceOp::kSum, i, 3, nranks);
        auto buffer = make_buffer(type, 1);
        store_value(type, sum, buffer, 0);
        EXPECT_EQ(load_value(type, buffer.data(), 0), sum) << type_name(type) << " n=" << nranks;
      }
    }
  }
}

TEST(Data, ValuesVaryWithRankIndexAndRep) {
  std::set<double> seen;
  for (int rank = 0; rank < 4; ++rank) {
    seen.insert(input_value(DataType::kFloat32, std::nullopt, rank, 0, 0, 4));
  }
  EXPECT_EQ(seen.size(), 4u);
  EXPECT_NE(input_value(DataType::kFloat32, ReduceOp::kSum, 1, 5, 0, 4),
            input_value(DataType::kFloat32, ReduceOp::kSum, 1, 5, 1, 4));
}

// The fills compute one period and copy it; they must equal the element-wise definitions at
// every offset, including tails shorter than a period and counts below one period.
TEST(Data, PeriodicFillsEqualTheElementwiseDefinitions) {
  const std::vector<std::optional<ReduceOp>> ops = {std::nullopt,   ReduceOp::kSum, ReduceOp::kProd,
                                                    ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kAvg};
  for (DataType type : {DataType::kFloat32, DataType::kInt32, DataType::kBFloat16}) {
    for (const auto& op : ops) {
      for (int nranks : {1, 3, 8}) {
        for (std::size_t first : {std::size_t{0}, std::size_t{5}, std::size_t{1000}}) {
          for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{7},
                                    std::size_t{251}, std::size_t{1237}}) {
            const std::size_t at = 3;
            auto input = make_buffer(type, at + count);
            fill_input(type, op, 2, first, count, 4, nranks, input, at);
            auto expected = make_buffer(type, at + count);
            if (op) fill_expected(type, *op, first, count, 4, nranks, expected, at);
            for (std::size_t i = 0; i < count; ++i) {
              auto one = make_buffer(type, 1);
              store_value(type, input_value(type, op, 2, first + i, 4, nranks), one, 0);
              ASSERT_EQ(load_value(type, input.data(), at + i), load_value(type, one.data(), 0))
                  << type_name(type) << " element " << i;
              if (!op) continue;
              store_value(type, expected_reduction(type, *op, first + i, 4, nranks), one, 0);
              ASSERT_EQ(load_value(type, expected.data(), at + i), load_value(type, one.data(), 0))
                  << type_name(type) << " " << op_name(*op) << " element " << i;
            }
          }
        }
      }
    }
  }
}

TEST(Data, AvgOfInt32TruncatesLikeNccl) {
  // Two ranks at index 0, rep 1 hold 1 and 4.
  const double avg = expected_reduction(DataType::kInt32, ReduceOp::kAvg, 0, 1, 2);  // 1 and 4
  EXPECT_EQ(avg, 2.0);  // 5 / 2 truncated
}

TEST(Data, CountWrongFindsEachBadElement) {
  auto expected = make_buffer(DataType::kFloat32, 4);
  auto got = make_buffer(DataType::kFloat32, 4);
  for (std::size_t i = 0; i < 4; ++i) {
    store_value(DataType::kFloat32, static_cast<double>(i), expected, i);
    store_value(DataType::kFloat32, static_cast<double>(i), got, i);
  }
  EXPECT_EQ(count_wrong(DataType::kFloat32, got.data(), expected.data(), 4), 0u);
  store_value(DataType::kFloat32, 7.0, got, 2);
  store_value(DataType::kFloat32, NAN, got, 3);
  EXPECT_EQ(count_wrong(DataType::kFloat32, got.data(), expected.data(), 4), 2u);
}

// Simulates each collective on the host from every rank's input and compares with what
// init_data expects, so that the expected images follow the collective's definition.
TEST(Data, ExpectedResultsFollowFromTheInputsOfAllRanks) {
  const int n = 3;
  const DataType type = DataType::kFloat32;
  const auto inputs = [&](const CollectiveTest& test, std::size_t count, ReduceOp op) {
    std::vector<HostData> all(n);
    for (int r = 0; r < n; ++r) {
      DataSetup setup{type, op, 1, r, n, 5, test.counts(count, n)};
      test.init_data(setup, all[static_cast<std::size_t>(r)]);
    }
    return all;
  };
  const auto at = [&](const std::vector<std::byte>& b, std::size_t i) {
    return load_value(type, b.data(), i);
  };
  {  // all_gather: block r of the result is rank r's input
    const auto all = inputs(all_gather_test(), 12, ReduceOp::kSum);
    for (int r = 0; r < n; ++r) {
      for (std::size_t i = 0; i < 4; ++i) {
        EXPECT_EQ(at(all[0].expected, static_cast<std::size_t>(r) * 4 + i),
                  at(all[static_cast<std::size_t>(r)].input, i));
      }
    }
  }
  {  // reduce_scatter: rank r gets the sum of block r of every input
    const auto all = inputs(reduce_scatter_test(), 12, ReduceOp::kSum);
    for (int r = 0; r < n; ++r) {
      for (std::size_t i = 0; i < 4; ++i) {
        double sum = 0;
        for (int s = 0; s < n; ++s)
          sum += at(all[static_cast<std::size_t>(s)].input, static_cast<std::size_t>(r) * 4 + i);
        EXPECT_EQ(at(all[static_cast<std::size_t>(r)].expected, i), sum);
      }
    }
  }
  {  // alltoall: block s of rank r's result is block r of rank s's input
    const auto all = inputs(alltoall_test(), 12, ReduceOp::kSum);
    for (int r = 0; r < n; ++r) {
      for (int s = 0; s < n; ++s) {
        for (std::size_t i = 0; i < 4; ++i) {
          EXPECT_EQ(
              at(all[static_cast<std::size_t>(r)].expected, static_cast<std::size_t>(s) * 4 + i),
              at(all[static_cast<std::size_t>(s)].input, static_cast<std::size_t>(r) * 4 + i));
        }
      }
    }
  }
  {  // sendrecv: rank r receives rank r-1's input; broadcast: everyone gets the root's
    const auto ring = inputs(sendrecv_test(), 4, ReduceOp::kSum);
    const auto bcast = inputs(broadcast_test(), 4, ReduceOp::kSum);
    for (int r = 0; r < n; ++r) {
      for (std::size_t i = 0; i < 4; ++i) {
        EXPECT_EQ(at(ring[static_cast<std::size_t>(r)].expected, i),
                  at(ring[static_cast<std::size_t>((r + n - 1) % n)].input, i));
        EXPECT_EQ(at(bcast[static_cast<std::size_t>(r)].expected, i), at(bcast[1].input, i));
      }
    }
  }
  {  // reduce: only the root's result is defined
    const auto all = inputs(reduce_test(), 4, ReduceOp::kMax);
    EXPECT_FALSE(all[0].checked);
    EXPECT_TRUE(all[1].checked);
    for (std::size_t i = 0; i < 4; ++i) {
      double top = at(all[0].input, i);
      for (int s = 1; s < n; ++s)
        top = std::max(top, at(all[static_cast<std::size_t>(s)].input, i));
      EXPECT_EQ(at(all[1].expected, i), top);
    }
  }
}

}  // namespace
