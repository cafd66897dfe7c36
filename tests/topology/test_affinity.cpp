// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include "topology/affinity_io.hpp"

namespace dtrain::topology {
namespace {

TEST(IntersectCpus, KeepsPlannedCpusTheTaskMayUse) {
  EXPECT_EQ(intersect_cpus({0, 1, 2, 3, 112, 113}, {1, 3, 5, 112}), (CpuList{1, 3, 112}));
  EXPECT_EQ(intersect_cpus({3, 1, 1}, {1, 2, 3}), (CpuList{1, 3}));  // unsorted input
  EXPECT_TRUE(intersect_cpus({56, 57}, {0, 1}).empty());             // a DGX plan on a 2-CPU host
  EXPECT_TRUE(intersect_cpus({}, {0, 1}).empty());
}

// Restores the test process's affinity whatever happens.
class AffinityTest : public ::testing::Test {
 protected:
  void SetUp() override { original_ = current_affinity(); }
  void TearDown() override { apply_cpu_affinity(original_); }
  CpuList original_;
};

TEST_F(AffinityTest, AppliesTheIntersection) {
  ASSERT_FALSE(original_.empty());
  const unsigned cpu = original_.back();
  const AffinityResult result = apply_cpu_affinity({cpu, 8000});  // 8000: a CPU this host lacks
  EXPECT_TRUE(result.applied);
  EXPECT_TRUE(result.warning.empty());
  EXPECT_EQ(result.cpus, CpuList{cpu});
  EXPECT_EQ(current_affinity(), CpuList{cpu});
}

TEST_F(AffinityTest, EmptyIntersectionLeavesAffinityUnchangedWithAWarning) {
  const AffinityResult result = apply_cpu_affinity({8000, 8001});
  EXPECT_FALSE(result.applied);
  EXPECT_EQ(result.cpus, original_);
  EXPECT_NE(result.warning.find("8000-8001"), std::string::npos) << result.warning;
  EXPECT_EQ(current_affinity(), original_);
}

}  // namespace
}  // namespace dtrain::topology
