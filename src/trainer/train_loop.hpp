// SPDX-License-Identifier: Apache-2.0
#pragma once
// The data-parallel training loop, written against the abstract Communicator and Engine so that
// it runs unchanged over MPI, NCCL or a test's in-process communicator.

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>

#include "bootstrap/communicator.hpp"
#include "trainer/checkpoint.hpp"
#include "trainer/engine.hpp"
#include "trainer/model.hpp"
#include "trainer/optimizer.hpp"
#include "trainer/report.hpp"
#include "trainer/sampler.hpp"
#include "trainer/sync.hpp"

namespace dtrain::trainer {

struct TrainerOptions {
  MlpShape shape{{256, 1024, 1024, 10}};
  std::uint64_t seed = 1;
  std::uint64_t samples = 65536;      // training set size
  std::uint64_t eval_samples = 2048;  // held-out set, indices [samples, samples+eval_samples)
  std::uint64_t batch_size = 32;      // per rank
  std::uint64_t epochs = 1;
  std::uint64_t max_steps = 0;  // 0: run all epochs
  bool drop_last = false;
  OptimizerConfig optimizer;
  SyncMode sync = SyncMode::kDdp;
  double bucket_mb = 25;
  // > 0: a single process computes, each step, the union of the batches that this many ranks
  // would process (the reference for the equivalence check).
  std::uint64_t reference_ranks = 0;
  std::string checkpoint_dir;
  std::uint64_t checkpoint_every = 0;
  std::string log_dir;
  std::uint64_t log_every = 10;
  std::optional<double> expect_loss;
  std::string json_path;
  std::string save_params_path;
  std::optional<Baseline> baseline;
};

// Ranks of the sampler world, and the number of samples one process handles per step.
std::uint64_t sampler_world(const TrainerOptions& options, int world_size);
std::uint64_t process_batch(const TrainerOptions& options);

// What must match for a checkpoint to be resumed.
RunIdentity run_identity(const TrainerOptions& options, int world_size);

struct TrainResult {
  RunSummary summary;
  bool hashes_agree = false;
  bool loss_reached = true;  // true when no --expect-loss was given
  int exit_code() const { return hashes_agree && loss_reached ? 0 : 1; }
};

// Trains; rank 0 writes progress and the summary to `out`. Throws dtrain::Error on bad input
// (on every rank alike, so no rank is left waiting in a collective).
TrainResult train(const TrainerOptions& options, bootstrap::Communicator& comm, Engine& engine,
                  std::ostream& out);

}  // namespace dtrain::trainer
