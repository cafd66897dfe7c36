// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include "bench/sweep.hpp"
#include "core/error.hpp"

namespace {

using namespace dtrain::bench;
using dtrain::bootstrap::DataType;
using dtrain::bootstrap::ReduceOp;

TEST(Sweep, SizesUseBinarySuffixesAsNcclTests) {
  EXPECT_EQ(parse_size("8", "-b"), 8u);
  EXPECT_EQ(parse_size("64K", "-b"), 65536u);
  EXPECT_EQ(parse_size("32M", "-b"), 33554432u);
  EXPECT_EQ(parse_size("1G", "-b"), 1073741824u);
  EXPECT_THROW(parse_size("1T", "-b"), dtrain::Error);
  EXPECT_THROW(parse_size("M", "-b"), dtrain::Error);
  EXPECT_THROW(parse_size("-8", "-b"), dtrain::Error);
}

TEST(Sweep, FactorAndStepSweeps) {
  EXPECT_EQ(sweep_sizes({8, 64, 2, 0}), (std::vector<std::uint64_t>{8, 16, 32, 64}));
  EXPECT_EQ(sweep_sizes({8, 70, 4, 0}), (std::vector<std::uint64_t>{8, 32}));
  EXPECT_EQ(sweep_sizes({100, 300, 1, 100}), (std::vector<std::uint64_t>{100, 200, 300}));
  EXPECT_EQ(sweep_sizes({64, 64, 1, 0}), (std::vector<std::uint64_t>{64}));
}

TEST(Sweep, RefusesSweepsThatAreEmptyOrEndless) {
  EXPECT_THROW(sweep_sizes({64, 8, 2, 0}), dtrain::Error);
  EXPECT_THROW(sweep_sizes({8, 64, 1, 0}), dtrain::Error);
  EXPECT_THROW(sweep_sizes({0, 64, 2, 0}), dtrain::Error);
}

TEST(Sweep, TypeAndOpNames) {
  EXPECT_EQ(parse_datatypes("bfloat16"), (std::vector<DataType>{DataType::kBFloat16}));
  EXPECT_EQ(parse_datatypes("all").size(), 5u);
  EXPECT_EQ(parse_reduce_ops("avg"), (std::vector<ReduceOp>{ReduceOp::kAvg}));
  EXPECT_THROW(parse_datatypes("fp8"), dtrain::Error);
  EXPECT_THROW(parse_reduce_ops("mean"), dtrain::Error);
}

TEST(Sweep, RowsAndFooterLookLikeNcclTests) {
  Row row{1048576,
          262144,
          "float",
          "sum",
          -1,
          {123.45, 8.49, 14.86, 0},
          {120.0, 8.74, 15.29, std::nullopt}};
  EXPECT_EQ(format_row(row),
            "     1048576        262144     float     sum      -1   123.45    8.49   14.86       0"
            "   120.00    8.74   15.29     N/A\n");
  const auto summary = summarize({row});
  EXPECT_DOUBLE_EQ(summary.avg_busbw, (14.86 + 15.29) / 2);
  EXPECT_DOUBLE_EQ(summary.peak_busbw, 15.29);
  EXPECT_TRUE(summary.peak_in_place);
  EXPECT_EQ(summary.wrong, 0);
  const std::string footer = format_footer(summary);
  EXPECT_NE(footer.find("# Avg bus bandwidth    : 15.075"), std::string::npos) << footer;
  EXPECT_NE(footer.find("# Peak bus bandwidth   : 15.29 GB/s at 1048576 B (in-place)"),
            std::string::npos)
      << footer;
  const std::string header = table_header();
  EXPECT_NE(header.find("size         count      type   redop    root     time   algbw   busbw  "
                        "#wrong"),
            std::string::npos)
      << header;
}

}  // namespace
