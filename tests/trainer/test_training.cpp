// SPDX-License-Identifier: Apache-2.0
// The training loop end to end over the in-process communicator: DDP against the
// single-process reference, naive and dp against DDP, hash agreement, and resume equivalence.

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <sstream>

#include "core/error.hpp"
#include "thread_communicator.hpp"
#include "trainer/checkpoint_store.hpp"
#include "trainer/train_loop.hpp"

namespace dtrain::trainer {
namespace {
namespace fs = std::filesystem;
using testing::run_ranks;
using testing::ThreadCommunicator;

TrainerOptions small_options() {
  TrainerOptions o;
  o.shape = MlpShape{{16, 32, 32, 4}};
  o.samples = 512;
  o.eval_samples = 256;
  o.batch_size = 8;
  o.epochs = 2;
  o.seed = 5;
  o.optimizer.kind = OptimizerKind::kSgd;
  o.optimizer.learning_rate = 0.05;
  o.optimizer.momentum = 0.9;
  o.bucket_mb = 0.002;  // ~2 KB: several buckets even for this small model
  o.log_every = 1000;
  return o;
}

struct RankOutcome {
  TrainResult result;
  std::vector<float> params;
  std::string output;
};

std::vector<RankOutcome> train_on(int ranks, const TrainerOptions& options) {
  return run_ranks<RankOutcome>(ranks, [&](ThreadCommunicator& comm) {
    auto engine = make_cpu_engine(options.shape, process_batch(options));
    std::ostringstream out;
    RankOutcome outcome;
    outcome.result = train(options, comm, *engine, out);
    outcome.params.assign(engine->params(), engine->params() + engine->layout().total());
    outcome.output = out.str();
    return outcome;
  });
}

double max_abs_difference(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (std::size_t k = 0; k < a.size(); ++k) worst = std::max(worst, std::abs(double{a[k]} - b[k]));
  return worst;
}

fs::path fresh_dir(const std::string& name) {
  const fs::path dir =
      fs::path(::testing::TempDir()) / ("dtrain_train_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(dir);
  return dir;
}

TEST(Training, LossFallsAndHashesAgree) {
  TrainerOptions o = small_options();
  o.samples = 4096;
  o.expect_loss = 0.8;  // ln(4) = 1.386 at the start
  const auto ranks = train_on(4, o);
  for (const RankOutcome& r : ranks) {
    EXPECT_TRUE(r.result.hashes_agree);
    EXPECT_TRUE(r.result.loss_reached) << r.result.summary.eval_loss;
    EXPECT_EQ(r.params, ranks[0].params);
  }
  EXPECT_LT(ranks[0].result.summary.eval_loss, 0.8);
  EXPECT_NE(ranks[0].output.find("parameter hash agreed on 4 ranks: 0x"), std::string::npos)
      << ranks[0].output;
  EXPECT_EQ(ranks[1].output, "");  // only rank 0 prints
  EXPECT_GT(ranks[0].result.summary.buckets, 1u);
}

TEST(Training, UnreachableExpectedLossFails) {
  TrainerOptions o = small_options();
  o.max_steps = 2;
  o.expect_loss = 0.01;
  const auto ranks = train_on(2, o);
  EXPECT_FALSE(ranks[0].result.loss_reached);
  EXPECT_EQ(ranks[0].result.exit_code(), 1);
  EXPECT_NE(ranks[0].output.find("dtrain: eval loss"), std::string::npos);
}

TEST(Training, DdpMatchesTheSingleProcessReference) {
  const TrainerOptions o = small_options();
  const auto ddp = train_on(4, o);
  TrainerOptions reference = o;
  reference.reference_ranks = 4;
  const auto single = train_on(1, reference);
  EXPECT_EQ(single[0].result.summary.global_batch, 32u);
  EXPECT_LT(max_abs_difference(ddp[0].params, single[0].params), 1e-4);
  // And a plain 1-rank run with the global batch sees the same samples (512 % 4 == 0).
  TrainerOptions plain = o;
  plain.batch_size = 32;
  const auto alone = train_on(1, plain);
  EXPECT_LT(max_abs_difference(ddp[0].params, alone[0].params), 1e-4);
}

// naive and dp move the same gradients by other routes (one all-reduce; a gather to rank 0,
// which alone steps, then a broadcast), so every rank must end where DDP ends.
class EverySyncMode : public ::testing::TestWithParam<SyncMode> {};

TEST_P(EverySyncMode, MatchesDdpAndTheSingleProcessReference) {
  TrainerOptions o = small_options();
  o.optimizer.kind = OptimizerKind::kAdam;
  o.optimizer.learning_rate = 0.01;
  const auto ddp = train_on(3, o);
  TrainerOptions reference = o;
  reference.reference_ranks = 3;
  const auto single = train_on(1, reference);
  o.sync = GetParam();
  const auto other = train_on(3, o);
  for (const RankOutcome& r : other) {
    EXPECT_TRUE(r.result.hashes_agree);
    EXPECT_EQ(r.result.summary.sync, sync_name(GetParam()));
  }
  EXPECT_LT(max_abs_difference(ddp[0].params, other[0].params), 1e-4);
  EXPECT_LT(max_abs_difference(single[0].params, other[0].params), 1e-4);
  EXPECT_NEAR(other[0].result.summary.eval_loss, single[0].result.summary.eval_loss, 1e-4);
}

INSTANTIATE_TEST_SUITE_P(Training, EverySyncMode,
                         ::testing::Values(SyncMode::kNaive, SyncMode::kDp),
                         [](const ::testing::TestParamInfo<SyncMode>& mode) {
                           return std::string(sync_name(mode.param));
                         });

TEST(Training, ResumedRunEqualsUninterruptedBitwise) {
  TrainerOptions o = small_options();
  o.optimizer.kind = OptimizerKind::kAdam;
  o.optimizer.learning_rate = 0.01;
  const auto uninterrupted = train_on(2, o);

  const fs::path dir = fresh_dir("resume");
  TrainerOptions first = o;
  first.checkpoint_dir = dir.string();
  first.checkpoint_every = 7;
  first.max_steps = 40;  // "killed" after step 40; the last checkpoint is at 40 (end of run)
  train_on(2, first);
  // Drop the end-of-run checkpoint so the resume starts from the interval checkpoint at 35,
  // as after a kill between two checkpoints.
  fs::remove(dir / "ckpt-40.dtc");
  TrainerOptions second = o;
  second.checkpoint_dir = dir.string();
  second.checkpoint_every = 7;
  const auto resumed = train_on(2, second);
  EXPECT_EQ(resumed[0].result.summary.first_step, 35u);
  EXPECT_NE(resumed[0].output.find("falling back"), std::string::npos) << resumed[0].output;
  EXPECT_EQ(resumed[0].params, uninterrupted[0].params);
  EXPECT_EQ(resumed[0].result.summary.parameter_hash,
            uninterrupted[0].result.summary.parameter_hash);
  fs::remove_all(dir);
}

TEST(Training, ResumeUnderADifferentConfigurationIsRefusedOnEveryRank) {
  const fs::path dir = fresh_dir("mismatch");
  TrainerOptions o = small_options();
  o.max_steps = 3;
  o.checkpoint_dir = dir.string();
  o.checkpoint_every = 3;
  train_on(2, o);
  o.batch_size = 4;
  try {
    train_on(2, o);
    FAIL() << "resumed a checkpoint of another configuration";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("batch_per_rank: checkpoint 8, this run 4"),
              std::string::npos)
        << e.what();
  }
  fs::remove_all(dir);
}

TEST(Training, WritesPerRankLogsAndJson) {
  const fs::path dir = fresh_dir("logs");
  fs::create_directories(dir);
  TrainerOptions o = small_options();
  o.max_steps = 4;
  o.log_every = 2;
  o.log_dir = dir.string();
  o.json_path = (dir / "run.json").string();
  const auto ranks = train_on(2, o);
  std::size_t logs = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.starts_with("node_") && name.ends_with(".log")) ++logs;
  }
  EXPECT_EQ(logs, 2u);
  const auto bytes = read_file(dir / "run.json");
  const auto json =
      nlohmann::json::parse(std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
  EXPECT_EQ(json["world_size"], 2);
  EXPECT_EQ(json["steps_run"], 4);
  EXPECT_EQ(json["ranks"].size(), 2u);
  EXPECT_NE(ranks[0].output.find("step 2/4 loss"), std::string::npos) << ranks[0].output;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace dtrain::trainer
