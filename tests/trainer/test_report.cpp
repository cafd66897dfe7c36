// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include "core/error.hpp"
#include "trainer/report.hpp"

namespace dtrain::trainer {
namespace {

RunSummary summary_of(std::uint64_t world, double wall_seconds) {
  RunSummary s;
  s.world_size = world;
  s.global_batch = 64 * world;
  s.steps_run = 100;
  s.parameter_hash = "0x0";
  for (std::uint64_t r = 0; r < world; ++r) {
    s.ranks.push_back(RankFigures{PhaseTotals{wall_seconds * 0.5, wall_seconds * 0.3, wall_seconds},
                                  1024.0 * static_cast<double>(r + 1)});
  }
  return s;
}

TEST(Report, ThroughputAndBreakdown) {
  const RunSummary s = summary_of(2, 4.0);
  EXPECT_DOUBLE_EQ(s.samples_per_sec(), 128.0 * 100 / 4.0);
  EXPECT_DOUBLE_EQ(s.step_ms(), 40.0);
  EXPECT_NEAR(s.ranks[0].totals.idle(), 0.8, 1e-12);
  const auto json = to_json(s);
  EXPECT_NEAR(json["compute_ms_per_step"].get<double>(), 20.0, 1e-9);
  EXPECT_NEAR(json["communication_ms_per_step"].get<double>(), 12.0, 1e-9);
  EXPECT_NEAR(json["idle_ms_per_step"].get<double>(), 8.0, 1e-9);
  EXPECT_EQ(json["peak_rss_kib_rank1"].get<double>(), 2048.0);
  EXPECT_TRUE(json["scaling_efficiency"].is_null());
  EXPECT_NE(format_summary(s).find("scaling efficiency not computed"), std::string::npos);
}

TEST(Report, ScalingEfficiencyAgainstABaselineJson) {
  const RunSummary one = summary_of(1, 2.0);  // 3200 samples/s
  RunSummary four = summary_of(4, 4.0);       // 6400 samples/s
  four.baseline = baseline_from_json(to_json(one).dump(), "one.json");
  ASSERT_TRUE(four.scaling_efficiency().has_value());
  EXPECT_NEAR(*four.scaling_efficiency(), 6400.0 / (4 * 3200.0), 1e-12);
  EXPECT_NEAR(to_json(four)["scaling_efficiency"].get<double>(), 0.5, 1e-12);
  EXPECT_NE(format_summary(four).find("scaling efficiency 50.0%"), std::string::npos);
}

TEST(Report, BaselineJsonMustHaveThroughput) {
  EXPECT_THROW(baseline_from_json("{", "bad.json"), Error);
  EXPECT_THROW(baseline_from_json(R"({"world_size": 1})", "bad.json"), Error);
  EXPECT_THROW(baseline_from_json(R"({"world_size": 1, "samples_per_sec": 0})", "bad.json"), Error);
}

TEST(Report, ProgressLine) {
  EXPECT_EQ(format_progress(20, 100, 0.5, 1234.5, 0.25),
            "step 20/100 loss 0.5000 samples/s 1234.5 comm 25.0%");
}

}  // namespace
}  // namespace dtrain::trainer
