// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/error.hpp"
#include "trainer/checkpoint.hpp"
#include "trainer/checkpoint_store.hpp"

namespace dtrain::trainer {
namespace {
namespace fs = std::filesystem;

TrainState sample_state(std::uint64_t step, std::size_t params = 1000) {
  TrainState s;
  s.identity = {{"model", "4-3"}, {"seed", "9"}};
  s.step = step;
  s.epoch = step / 10;
  s.step_in_epoch = step % 10;
  s.seed = 9;
  for (std::size_t k = 0; k < params; ++k)
    s.params.push_back(static_cast<float>(k) * 0.5f + static_cast<float>(step));
  s.optimizer.steps = step;
  s.optimizer.first.assign(params, 0.25f);
  s.optimizer.second.assign(params, 0.125f);
  return s;
}

class TempDir : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           ("dtrain_ckpt_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }
  fs::path dir_;
};

void expect_refused(std::span<const std::byte> bytes, const std::string& reason) {
  try {
    decode_checkpoint(bytes, "/x/ckpt-5.dtc");
    FAIL() << "accepted a damaged checkpoint (" << reason << ")";
  } catch (const Error& e) {
    const std::string text = e.what();
    EXPECT_NE(text.find("/x/ckpt-5.dtc"), std::string::npos) << text;
    EXPECT_NE(text.find(reason), std::string::npos) << text;
  }
}

TEST(CheckpointCodec, RoundTrips) {
  const TrainState s = sample_state(37);
  const TrainState back = decode_checkpoint(encode_checkpoint(s), "mem");
  EXPECT_EQ(back.identity, s.identity);
  EXPECT_EQ(back.step, 37u);
  EXPECT_EQ(back.epoch, 3u);
  EXPECT_EQ(back.step_in_epoch, 7u);
  EXPECT_EQ(back.seed, 9u);
  EXPECT_EQ(back.params, s.params);
  EXPECT_EQ(back.optimizer.steps, 37u);
  EXPECT_EQ(back.optimizer.first, s.optimizer.first);
  EXPECT_EQ(back.optimizer.second, s.optimizer.second);
}

TEST(CheckpointCodec, RefusesCorruptTruncatedAndForeignFiles) {
  const std::vector<std::byte> good = encode_checkpoint(sample_state(5));
  std::vector<std::byte> flipped = good;
  flipped[good.size() / 2] ^= std::byte{0x01};
  expect_refused(flipped, "payload checksum mismatch");
  expect_refused(std::span(good).first(good.size() - 3), "truncated");
  expect_refused(std::span(good).first(20), "truncated");
  std::vector<std::byte> longer = good;
  longer.push_back(std::byte{0});
  expect_refused(longer, "trailing bytes");
  std::vector<std::byte> magic = good;
  magic[0] = std::byte{'X'};
  expect_refused(magic, "bad magic");
  std::vector<std::byte> header = good;
  header[20] ^= std::byte{0x10};  // payload size field
  expect_refused(header, "header checksum");
}

TEST(CheckpointCodec, IdentityMismatchNamesTheKey) {
  const RunIdentity a = {{"model", "4-3"}, {"world", "4"}};
  const RunIdentity b = {{"model", "4-3"}, {"world", "2"}};
  EXPECT_EQ(identity_mismatch(a, a), "");
  EXPECT_EQ(identity_mismatch(a, b), "world: checkpoint 4, this run 2");
}

TEST_F(TempDir, StoreKeepsTheLastTwoAndCommitsLatest) {
  CheckpointStore store(dir_);
  EXPECT_FALSE(store.load_latest().has_value());
  for (std::uint64_t step : {5, 10, 15}) store.save(sample_state(step));
  EXPECT_EQ(names(), (std::vector<std::string>{"ckpt-10.dtc", "ckpt-15.dtc", "latest"}));
  const auto loaded = store.load_latest();
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ(loaded->state.step, 15u);
  EXPECT_TRUE(loaded->warnings.empty());
}

TEST_F(TempDir, CorruptLatestFallsBackToThePreviousWithAWarning) {
  CheckpointStore store(dir_);
  store.save(sample_state(10));
  store.save(sample_state(20));
  {
    std::fstream f(dir_ / "ckpt-20.dtc", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f.put('\x7f');
  }
  const auto loaded = store.load_latest();
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ(loaded->state.step, 10u);
  ASSERT_EQ(loaded->warnings.size(), 1u);
  EXPECT_NE(loaded->warnings[0].find("ckpt-20.dtc"), std::string::npos);
  EXPECT_NE(loaded->warnings[0].find("refusing"), std::string::npos);
}

TEST_F(TempDir, TruncatedLatestFallsBackAndAllDamagedIsAnError) {
  CheckpointStore store(dir_);
  store.save(sample_state(10));
  store.save(sample_state(20));
  fs::resize_file(dir_ / "ckpt-20.dtc", fs::file_size(dir_ / "ckpt-20.dtc") / 2);
  EXPECT_EQ(store.load_latest()->state.step, 10u);
  fs::resize_file(dir_ / "ckpt-10.dtc", 10);
  try {
    store.load_latest();
    FAIL() << "loaded from a directory of damaged checkpoints";
  } catch (const Error& e) {
    const std::string text = e.what();
    EXPECT_NE(text.find("ckpt-20.dtc"), std::string::npos) << text;
    EXPECT_NE(text.find("ckpt-10.dtc"), std::string::npos) << text;
  }
}

TEST_F(TempDir, FailedAtomicWriteLeavesNoPartialFile) {
  // The target name is taken by a non-empty directory, so the final rename fails.
  fs::create_directories(dir_ / "target" / "occupied");
  const std::vector<std::byte> bytes(4096, std::byte{1});
  EXPECT_THROW(write_file_atomically(dir_ / "target", bytes), Error);
  EXPECT_EQ(names(), (std::vector<std::string>{"target"}));
  EXPECT_TRUE(fs::is_directory(dir_ / "target"));
}

TEST_F(TempDir, KilledWriterLeavesOldOrNewNeverPartial) {
  CheckpointStore store(dir_);
  store.save(sample_state(1, 200000));
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Rewrite checkpoints forever (~2.4 MB each) until killed.
    CheckpointStore writer(dir_);
    for (std::uint64_t step = 2;; ++step) writer.save(sample_state(step, 200000));
  }
  // Wait until the child has committed at least one new checkpoint, then kill it mid-stream.
  while (true) {
    const auto loaded = store.load_latest();
    if (loaded && loaded->state.step >= 3) break;
  }
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  const auto loaded = store.load_latest();
  ASSERT_TRUE(loaded.has_value());
  EXPECT_TRUE(loaded->warnings.empty()) << loaded->warnings.front();
  EXPECT_EQ(loaded->state.params, sample_state(loaded->state.step, 200000).params);
  for (const std::string& name : names()) {
    if (name.starts_with("ckpt-")) {
      EXPECT_NO_THROW(decode_checkpoint(read_file(dir_ / name), name)) << name;
    }
  }
  store.remove_stale_temporaries();
  for (const std::string& name : names()) EXPECT_FALSE(name.ends_with(".tmp")) << name;
}

}  // namespace
}  // namespace dtrain::trainer
