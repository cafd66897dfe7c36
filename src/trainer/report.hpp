// SPDX-License-Identifier: Apache-2.0
#pragma once
// Run statistics: the step-time breakdown, throughput, scaling efficiency and peak memory, as
// text for rank 0's summary and as JSON for --json (the two carry the same fields).
//
// Breakdown of a step's wall time:
//   compute        forward, backward, optimizer, batch generation (rank-local work)
//   communication  time blocked in collectives: launching, waiting for the gradient buckets,
//                  the naive all-reduce, dp's gather/broadcast, the loss all-reduce of a log
//                  interval
//   idle           the rest: checkpoint writing and its barrier, logging

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace dtrain::trainer {

struct PhaseTotals {
  double compute = 0;
  double communication = 0;
  double wall = 0;
  double idle() const {
    return wall > compute + communication ? wall - compute - communication : 0;
  }
};

struct RankFigures {
  PhaseTotals totals;
  double peak_rss_kib = 0;
};

struct Baseline {
  double samples_per_sec = 0;
  std::uint64_t world_size = 1;
  std::string source;  // "--baseline-samples-per-sec" or the JSON file
};

struct RunSummary {
  std::uint64_t world_size = 1;
  std::string sync;
  std::string device;
  std::string backend;
  std::string model;
  std::uint64_t parameters = 0;
  std::string optimizer;
  std::uint64_t global_batch = 0;
  double bucket_mb = 0;
  std::uint64_t buckets = 0;
  std::uint64_t first_step = 0;  // > 0 when resumed
  std::uint64_t steps_run = 0;
  std::uint64_t total_steps = 0;
  double final_train_loss = 0;  // mean over the last log interval, all ranks
  double eval_loss = 0;
  double eval_accuracy = 0;
  std::uint64_t eval_samples = 0;
  std::string parameter_hash;
  std::vector<RankFigures> ranks;
  std::optional<Baseline> baseline;

  double samples_per_sec() const;
  double step_ms() const;
  std::optional<double> scaling_efficiency() const;
};

// Reads "samples_per_sec" and "world_size" from a previous --json output.
Baseline baseline_from_json(const std::string& text, const std::string& source);

nlohmann::json to_json(const RunSummary& summary);
std::string format_summary(const RunSummary& summary);
std::string format_progress(std::uint64_t step, std::uint64_t total_steps, double loss,
                            double samples_per_sec, double communication_share);

}  // namespace dtrain::trainer
