// SPDX-License-Identifier: Apache-2.0
#include "trainer/report.hpp"

#include <algorithm>
#include <cstdio>

#include "core/error.hpp"

namespace dtrain::trainer {
namespace {

std::string fixed(double value, int decimals) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", decimals, value);
  return text;
}

double per_step_ms(double seconds, std::uint64_t steps) {
  return steps == 0 ? 0.0 : 1e3 * seconds / static_cast<double>(steps);
}

}  // namespace

double RunSummary::samples_per_sec() const {
  if (ranks.empty() || ranks.front().totals.wall <= 0) return 0;
  return static_cast<double>(steps_run * global_batch) / ranks.front().totals.wall;
}

double RunSummary::step_ms() const {
  return ranks.empty() ? 0 : per_step_ms(ranks.front().totals.wall, steps_run);
}

std::optional<double> RunSummary::scaling_efficiency() const {
  if (!baseline || baseline->samples_per_sec <= 0 || baseline->world_size == 0) return std::nullopt;
  const double per_rank_baseline =
      baseline->samples_per_sec / static_cast<double>(baseline->world_size);
  return samples_per_sec() / (per_rank_baseline * static_cast<double>(world_size));
}

Baseline baseline_from_json(const std::string& text, const std::string& source) {
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw_invalid("--baseline-json " + source + " is not valid JSON: " + e.what());
  }
  const auto sps = doc.find("samples_per_sec");
  const auto world = doc.find("world_size");
  if (sps == doc.end() || !sps->is_number() || world == doc.end() || !world->is_number_unsigned() ||
      sps->get<double>() <= 0 || world->get<std::uint64_t>() == 0) {
    throw_invalid("--baseline-json " + source +
                  " lacks a positive samples_per_sec and world_size; pass the --json output of a "
                  "previous dtrain-trainer run");
  }
  return Baseline{sps->get<double>(), world->get<std::uint64_t>(), source};
}

nlohmann::json to_json(const RunSummary& s) {
  nlohmann::json ranks = nlohmann::json::array();
  for (std::size_t r = 0; r < s.ranks.size(); ++r) {
    const PhaseTotals& t = s.ranks[r].totals;
    ranks.push_back({{"rank", r},
                     {"peak_rss_kib", s.ranks[r].peak_rss_kib},
                     {"compute_ms_per_step", per_step_ms(t.compute, s.steps_run)},
                     {"communication_ms_per_step", per_step_ms(t.communication, s.steps_run)},
                     {"idle_ms_per_step", per_step_ms(t.idle(), s.steps_run)}});
  }
  const PhaseTotals& t0 = s.ranks.front().totals;
  nlohmann::json doc = {
      {"world_size", s.world_size},
      {"sync", s.sync},
      {"device", s.device},
      {"backend", s.backend},
      {"model", s.model},
      {"parameters", s.parameters},
      {"optimizer", s.optimizer},
      {"global_batch", s.global_batch},
      {"bucket_mb", s.bucket_mb},
      {"buckets", s.buckets},
      {"first_step", s.first_step},
      {"steps_run", s.steps_run},
      {"total_steps", s.total_steps},
      {"samples_per_sec", s.samples_per_sec()},
      {"step_ms", s.step_ms()},
      {"compute_ms_per_step", per_step_ms(t0.compute, s.steps_run)},
      {"communication_ms_per_step", per_step_ms(t0.communication, s.steps_run)},
      {"idle_ms_per_step", per_step_ms(t0.idle(), s.steps_run)},
      {"communication_share", t0.wall > 0 ? t0.communication / t0.wall : 0.0},
      {"final_train_loss", s.final_train_loss},
      {"eval_loss", s.eval_loss},
      {"eval_accuracy", s.eval_accuracy},
      {"eval_samples", s.eval_samples},
      {"parameter_hash", s.parameter_hash},
      {"peak_rss_kib_rank0", s.ranks.front().peak_rss_kib},
      {"ranks", ranks},
  };
  if (s.ranks.size() > 1) doc["peak_rss_kib_rank1"] = s.ranks[1].peak_rss_kib;
  if (const auto efficiency = s.scaling_efficiency()) {
    doc["scaling_efficiency"] = *efficiency;
    doc["baseline_samples_per_sec"] = s.baseline->samples_per_sec;
    doc["baseline_world_size"] = s.baseline->world_size;
    doc["baseline_source"] = s.baseline->source;
  } else {
    doc["scaling_efficiency"] = nullptr;
  }
  return doc;
}

std::string format_summary(const RunSummary& s) {
  const PhaseTotals& t0 = s.ranks.front().totals;
  std::string out;
  out += "summary: " + std::to_string(s.world_size) + " rank(s), sync " + s.sync + ", device " +
         s.device + ", backend " + s.backend + ", model " + s.model + " (" +
         std::to_string(s.parameters) + " parameters), " + s.optimizer + ", global batch " +
         std::to_string(s.global_batch) + "\n";
  out += "  steps " + std::to_string(s.first_step) + ".." +
         std::to_string(s.first_step + s.steps_run) + " of " + std::to_string(s.total_steps) +
         ", throughput " + fixed(s.samples_per_sec(), 1) + " samples/s, step " +
         fixed(s.step_ms(), 2) + " ms\n";
  out += "  step time (rank 0): compute " + fixed(per_step_ms(t0.compute, s.steps_run), 2) +
         " ms, communication " + fixed(per_step_ms(t0.communication, s.steps_run), 2) +
         " ms, idle " + fixed(per_step_ms(t0.idle(), s.steps_run), 2) + " ms (communication " +
         fixed(t0.wall > 0 ? 100.0 * t0.communication / t0.wall : 0.0, 1) + "%)\n";
  if (const auto efficiency = s.scaling_efficiency()) {
    out += "  scaling efficiency " + fixed(100.0 * *efficiency, 1) + "% against " +
           fixed(s.baseline->samples_per_sec, 1) + " samples/s on " +
           std::to_string(s.baseline->world_size) + " rank(s) (" + s.baseline->source + ")\n";
  } else {
    out +=
        "  scaling efficiency not computed (give --baseline-samples-per-sec or --baseline-json)\n";
  }
  out += "  peak RSS: rank 0 " + fixed(s.ranks.front().peak_rss_kib / 1024.0, 1) + " MiB";
  if (s.ranks.size() > 1) {
    out += ", rank 1 " + fixed(s.ranks[1].peak_rss_kib / 1024.0, 1) + " MiB";
    double highest = 0;
    for (const RankFigures& r : s.ranks) highest = std::max(highest, r.peak_rss_kib);
    out += ", max " + fixed(highest / 1024.0, 1) + " MiB";
  }
  out += "\n";
  out += "  final train loss " + fixed(s.final_train_loss, 4) + ", eval loss " +
         fixed(s.eval_loss, 4) + ", eval accuracy " + fixed(100.0 * s.eval_accuracy, 1) + "% on " +
         std::to_string(s.eval_samples) + " held-out samples\n";
  return out;
}

std::string format_progress(std::uint64_t step, std::uint64_t total_steps, double loss,
                            double samples_per_sec, double communication_share) {
  return "step " + std::to_string(step) + "/" + std::to_string(total_steps) + " loss " +
         fixed(loss, 4) + " samples/s " + fixed(samples_per_sec, 1) + " comm " +
         fixed(100.0 * communication_share, 1) + "%";
}

}  // namespace dtrain::trainer
