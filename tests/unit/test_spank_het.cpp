// SPDX-License-Identifier: Apache-2.0
// Heterogeneous steps through the real SPANK callbacks: slurmctld's answers come from the fake's
// slurm_job_step_layout_get, the environment is what Slurm sets on each node.
#include <gtest/gtest.h>

#include <slurm/slurm.h>

#include "spank/state.hpp"
#include "spank_fake.hpp"
#include "spank_test.hpp"

using dtrain::testing::fake;
using dtrain::testing::handle;

namespace {

class SpankHetStep : public dtrain::testing::SpankTest {
 protected:
  // srun -w gpu[1-2] -n4 : -w cpu1 -n1, seen from cpu1 (component 1, job 501): Slurm sorts
  // the step's lists, cpu1 first.
  void het_step_on_cpu1() {
    fake().context = S_CTX_REMOTE;
    fake().items = {{S_JOB_ID, 501},   {S_JOB_STEPID, 0},           {S_JOB_NODEID, 0},
                    {S_JOB_NNODES, 1}, {S_JOB_TOTAL_TASK_COUNT, 1}, {S_JOB_LOCAL_TASK_COUNT, 1}};
    fake().local_to_global = {0};
    fake().job_env = {
        {"SLURM_STEP_NODELIST", "cpu1,gpu[1-2]"}, {"SLURM_STEP_TASKS_PER_NODE", "1,2(x2)"},
        {"SLURM_DISTRIBUTION", "block"},          {"SLURM_JOB_ID_PACK_GROUP_0", "500"},
        {"SLURM_JOB_ID_PACK_GROUP_1", "501"},     {"SLURM_PACK_SIZE", "2"}};
    fake().step_layouts[500] = {{"gpu1", "gpu2"}, {{0, 1}, {2, 3}}, 0};
    fake().step_layouts[501] = {{"cpu1"}, {{0}}, 0};
  }

  int start(std::vector<std::string> args) {
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    if (slurm_spank_init(handle(), static_cast<int>(argv.size()), argv.data()) != 0) return -1;
    if (fake().options.at(0)->cb(fake().options[0]->val, nullptr, 1) != 0) return -1;
    if (slurm_spank_init_post_opt(handle(), 0, nullptr) != 0) return -1;
    return slurm_spank_user_init(handle(), 0, nullptr);
  }
};

}  // namespace

TEST_F(SpankHetStep, ANodeOfTheSecondComponentGetsItsRankWhenNodesSortOtherwise) {
  het_step_on_cpu1();
  ASSERT_EQ(start({"address=name"}), 0);
  ::testing::internal::CaptureStderr();
  ASSERT_EQ(task(0, 0), 0);
  ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(ended_with(), -1) << (fake().errors.empty() ? "" : fake().errors[0]);
  EXPECT_EQ(fake().job_env["DTRAIN_RANK"], "4");
  EXPECT_EQ(fake().job_env["DTRAIN_WORLD_SIZE"], "5");
  EXPECT_EQ(fake().job_env["DTRAIN_NODE_RANK"], "2");  // Slurm's SLURM_NODEID: component order
  EXPECT_EQ(fake().job_env["DTRAIN_NNODES"], "3");
  EXPECT_EQ(fake().job_env["MASTER_ADDR"], "gpu1");
  EXPECT_EQ(fake().job_env["DTRAIN_CURRENT_ENDPOINT"].rfind("cpu1:", 0), 0u);
}

// A timeout on component 0's layout request: the node stops its tasks and says why, rather than
// form a world of cpu1 alone whose own checks would pass.
TEST_F(SpankHetStep, AFailedLayoutRequestStopsTheTaskNamingTheComponent) {
  het_step_on_cpu1();
  fake().step_layouts[500].error = SLURM_PROTOCOL_SOCKET_IMPL_TIMEOUT;
  ASSERT_EQ(start({"address=name"}), 0);
  ::testing::internal::CaptureStderr();
  task(0, 0);
  const auto printed = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(ended_with(), 1);
  EXPECT_TRUE(logged("cannot get the layout of component 0 (job 500)") ||
              printed.find("cannot get the layout of component 0 (job 500)") != std::string::npos)
      << printed;
  EXPECT_EQ(fake().job_env.count("DTRAIN_RANK"), 0u);
}

// srun --het-group=1: component 0 has no such step; the world is component 1's alone.
TEST_F(SpankHetStep, AComponentLeftOutByHetGroupIsSkipped) {
  het_step_on_cpu1();
  fake().step_layouts.erase(500);
  fake().items[S_JOB_TOTAL_TASK_COUNT] = 1;
  fake().job_env.erase("SLURM_STEP_NODELIST");
  fake().job_env.erase("SLURM_STEP_TASKS_PER_NODE");
  fake().job_env.emplace("SLURM_STEP_NODELIST", "cpu1");
  fake().job_env.emplace("SLURM_STEP_TASKS_PER_NODE", "1");
  ASSERT_EQ(start({"address=name"}), 0);
  ::testing::internal::CaptureStderr();
  ASSERT_EQ(task(0, 0), 0);
  ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(ended_with(), -1);
  EXPECT_EQ(fake().job_env["DTRAIN_RANK"], "0");
  EXPECT_EQ(fake().job_env["DTRAIN_WORLD_SIZE"], "1");
}

// srun A : B inside an ordinary allocation: no SLURM_HET_SIZE, and the lists hold more tasks
// than this component. One message that names het steps, not "host list names more hosts".
TEST_F(SpankHetStep, AHetStepInsideAnOrdinaryAllocationIsRefusedByName) {
  het_step_on_cpu1();
  for (const char* name :
       {"SLURM_JOB_ID_PACK_GROUP_0", "SLURM_JOB_ID_PACK_GROUP_1", "SLURM_PACK_SIZE"}) {
    fake().job_env.erase(name);
  }
  ASSERT_EQ(start({"address=name"}), 0);
  ::testing::internal::CaptureStderr();
  task(0, 0);
  const auto printed = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(ended_with(), 1);
  EXPECT_TRUE(logged("heterogeneous step (srun A : B) inside an allocation that is not "
                     "heterogeneous") ||
              printed.find("inside an allocation that is not heterogeneous") != std::string::npos)
      << printed;
}
