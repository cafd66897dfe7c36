// SPDX-License-Identifier: Apache-2.0
// dtrain-trainer under mpirun on loopback (no Slurm): DDP on 4 ranks equals the single-process
// reference, naive and dp (MPI_Gather to rank 0) equal DDP, every rank agrees on the parameter
// hash, and a run resumed from a checkpoint ends bitwise where an uninterrupted one does.

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <regex>

#include "trainer/checkpoint.hpp"
#include "trainer/checkpoint_store.hpp"

namespace dtrain::trainer {
namespace {
namespace fs = std::filesystem;

const std::string kModel =
    " --input-dim 32 --hidden 64 --classes 4 --samples 4096 --epochs 2 --batch-size 16"
    " --lr 0.01 --log-every 1000";

struct ToolRun {
  int status = -1;
  std::string output;
};

ToolRun run(int ranks, const std::string& args) {
  const std::string command = std::string(DTRAIN_MPIEXEC) +
                              " --allow-run-as-root --oversubscribe -np " + std::to_string(ranks) +
                              " --mca btl self,vader,tcp --mca btl_tcp_if_include lo"
                              " --mca oob_tcp_if_include lo " +
                              DTRAIN_TRAINER_PATH + args + " 2>&1";
  ToolRun result;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  std::size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) result.output.append(buffer, n);
  result.status = ::pclose(pipe);
  return result;
}

class MpiTrainer : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           ("dtrain_mpi_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::vector<float> params(const std::string& name) {
    const fs::path path = dir_ / name;
    return decode_checkpoint(read_file(path), path.string()).params;
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

double max_abs_difference(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (std::size_t k = 0; k < std::min(a.size(), b.size()); ++k) {
    worst = std::max(worst, std::abs(double{a[k]} - b[k]));
  }
  return worst;
}

std::string agreed_hash(const ToolRun& r, int ranks) {
  std::smatch match;
  const std::regex pattern("parameter hash agreed on " + std::to_string(ranks) +
                           " ranks: (0x[0-9a-f]{16})");
  if (!std::regex_search(r.output, match, pattern)) return "";
  return match[1];
}

TEST_F(MpiTrainer, DdpOnFourRanksEqualsTheSingleProcessReference) {
  const ToolRun ddp = run(4, kModel + " --expect-loss 0.3 --save-params " + path("ddp.dtc"));
  ASSERT_EQ(ddp.status, 0) << ddp.output;
  EXPECT_NE(agreed_hash(ddp, 4), "") << ddp.output;
  const ToolRun reference =
      run(1, kModel + " --reference-ranks 4 --save-params " + path("ref.dtc"));
  ASSERT_EQ(reference.status, 0) << reference.output;
  EXPECT_LT(max_abs_difference(params("ddp.dtc"), params("ref.dtc")), 1e-4);
}

TEST_F(MpiTrainer, NaiveAndDpEqualDdp) {
  const ToolRun ddp = run(4, kModel + " --bucket-mb 0.002 --save-params " + path("ddp.dtc"));
  ASSERT_EQ(ddp.status, 0) << ddp.output;
  for (const std::string sync : {"naive", "dp"}) {
    const ToolRun other =
        run(4, kModel + " --sync " + sync + " --save-params " + path(sync + ".dtc"));
    ASSERT_EQ(other.status, 0) << other.output;
    EXPECT_NE(agreed_hash(other, 4), "") << other.output;
    EXPECT_LT(max_abs_difference(params("ddp.dtc"), params(sync + ".dtc")), 1e-4) << sync;
  }
}

TEST_F(MpiTrainer, ResumeEndsBitwiseWhereAnUninterruptedRunEnds) {
  const ToolRun whole = run(2, kModel);
  ASSERT_EQ(whole.status, 0) << whole.output;
  const std::string checkpoints = " --checkpoint-every 50 --checkpoint-dir " + path("ckpt");
  const ToolRun first = run(2, kModel + checkpoints + " --max-steps 120");
  ASSERT_EQ(first.status, 0) << first.output;
  fs::remove(dir_ / "ckpt" / "ckpt-120.dtc");  // as if killed between checkpoints 100 and 150
  const ToolRun second = run(2, kModel + checkpoints);
  ASSERT_EQ(second.status, 0) << second.output;
  EXPECT_NE(second.output.find("at step 100"), std::string::npos) << second.output;
  EXPECT_EQ(agreed_hash(second, 2), agreed_hash(whole, 2)) << second.output;
  EXPECT_NE(agreed_hash(whole, 2), "");
}

TEST_F(MpiTrainer, CorruptCheckpointIsRefusedByName) {
  const std::string checkpoints = " --checkpoint-dir " + path("ckpt");
  ASSERT_EQ(run(2, kModel + checkpoints + " --max-steps 10").status, 0);
  fs::resize_file(dir_ / "ckpt" / "ckpt-10.dtc", 100);
  const ToolRun again = run(2, kModel + checkpoints);
  EXPECT_NE(again.status, 0);
  EXPECT_NE(again.output.find("dtrain: no usable checkpoint"), std::string::npos) << again.output;
  EXPECT_NE(again.output.find("ckpt-10.dtc is corrupt: truncated"), std::string::npos)
      << again.output;
}

TEST_F(MpiTrainer, BadFlagGivesOneDtrainError) {
  const ToolRun bad = run(2, " --bucket-mb -1");
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.output.find("dtrain: --bucket-mb"), std::string::npos) << bad.output;
}

}  // namespace
}  // namespace dtrain::trainer
