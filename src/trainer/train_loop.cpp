// SPDX-License-Identifier: Apache-2.0
#include "trainer/train_loop.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <ostream>

#include "core/error.hpp"
#include "trainer/checkpoint_store.hpp"
#include "trainer/dataset.hpp"

namespace dtrain::trainer {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::string hostname() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "unknown";
  return name;
}

double peak_rss_kib() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss);  // KiB on Linux
}

// Lines go to this rank's log file, and rank 0's also to `out`.
class RankLog {
 public:
  RankLog(const std::string& directory, int rank, std::ostream& out) : rank_(rank), out_(out) {
    if (directory.empty()) return;
    const std::string path =
        directory + "/node_" + hostname() + "_rank_" + std::to_string(rank) + ".log";
    file_.open(path, std::ios::out | std::ios::app);
    if (!file_) throw Error(ErrorKind::kResource, "cannot open log file " + path);
  }
  void line(const std::string& text, bool echo_on_rank0 = true) {
    if (file_) file_ << text << '\n' << std::flush;
    if (echo_on_rank0 && rank_ == 0) out_ << text << '\n' << std::flush;
  }

 private:
  int rank_;
  std::ostream& out_;
  std::ofstream file_;
};

enum class LoadStatus : std::uint8_t { kNone = 0, kCheckpoint = 1, kError = 2 };

// Rank 0 alone reads the checkpoint directory and broadcasts what it found, as
// broadcast_object_list does; the status byte lets an error on rank 0 stop every rank.
std::optional<TrainState> load_and_share(const TrainerOptions& options, HostChannel& channel,
                                         RankLog& log) {
  std::vector<std::byte> message(1, std::byte{0});
  if (channel.rank() == 0) {
    try {
      CheckpointStore store(options.checkpoint_dir);
      store.remove_stale_temporaries();
      if (auto loaded = store.load_latest()) {
        for (const std::string& warning : loaded->warnings) log.line("dtrain: warning: " + warning);
        if (!loaded->warnings.empty()) {
          log.line("dtrain: warning: falling back to the previous checkpoint " +
                   loaded->path.string());
        }
        log.line("resuming from " + loaded->path.string() + " at step " +
                 std::to_string(loaded->state.step));
        message[0] = std::byte{static_cast<std::uint8_t>(LoadStatus::kCheckpoint)};
        message.insert(message.end(), loaded->bytes.begin(), loaded->bytes.end());
      }
    } catch (const Error& e) {
      const std::string text = e.what();
      message.assign(1, std::byte{static_cast<std::uint8_t>(LoadStatus::kError)});
      for (char c : text) message.push_back(static_cast<std::byte>(c));
    }
  }
  channel.broadcast_bytes(message, 0);
  const auto status = static_cast<LoadStatus>(message.at(0));
  const std::span<const std::byte> body = std::span<const std::byte>(message).subspan(1);
  if (status == LoadStatus::kError) {
    std::string text;
    for (std::byte b : body) text.push_back(static_cast<char>(b));
    throw Error(ErrorKind::kInvalidInput, text);
  }
  if (status == LoadStatus::kNone) return std::nullopt;
  return decode_checkpoint(body, options.checkpoint_dir + " (broadcast from rank 0)");
}

TrainState capture_state(Engine& engine, const TrainerOptions& options, int world_size,
                         std::uint64_t step, std::uint64_t steps_in_epoch) {
  TrainState state;
  state.identity = run_identity(options, world_size);
  state.step = step;
  state.epoch = step / steps_in_epoch;
  state.step_in_epoch = step % steps_in_epoch;
  state.seed = options.seed;
  state.params.resize(engine.layout().total());
  engine.copy_to_host(state.params.data(), engine.params(), state.params.size() * sizeof(float));
  if (engine.has_optimizer()) state.optimizer = engine.read_optimizer_state();
  return state;
}

// Rank 0 writes; a failure there is broadcast so that every rank stops with the same error.
void checkpoint(const TrainerOptions& options, HostChannel& channel, Engine& engine,
                std::uint64_t step, std::uint64_t steps_in_epoch, RankLog& log) {
  std::vector<std::byte> outcome;
  if (channel.rank() == 0) {
    try {
      CheckpointStore store(options.checkpoint_dir);
      const auto path =
          store.save(capture_state(engine, options, channel.size(), step, steps_in_epoch));
      log.line("checkpoint " + path.string() + " written at step " + std::to_string(step));
    } catch (const Error& e) {
      const std::string text =
          std::string("checkpoint at step ") + std::to_string(step) + " failed: " + e.what();
      for (char c : text) outcome.push_back(static_cast<std::byte>(c));
    }
  }
  channel.broadcast_bytes(outcome, 0);
  if (!outcome.empty()) {
    std::string text;
    for (std::byte b : outcome) text.push_back(static_cast<char>(b));
    throw Error(ErrorKind::kResource, text);
  }
  channel.barrier();
}

void evaluate(const TrainerOptions& options, const SyntheticDataset& data, Engine& engine,
              HostChannel& channel, RunSummary& summary) {
  // Held-out samples are split round-robin over the ranks; sums are all-reduced.
  const std::uint64_t chunk = process_batch(options);
  std::vector<std::uint64_t> indices;
  for (std::uint64_t k = static_cast<std::uint64_t>(channel.rank()); k < options.eval_samples;
       k += static_cast<std::uint64_t>(channel.size())) {
    indices.push_back(options.samples + k);
  }
  double totals[2] = {0, 0};  // loss sum, correct
  std::vector<float> inputs;
  std::vector<std::int32_t> labels;
  for (std::size_t start = 0; start < indices.size(); start += chunk) {
    const std::size_t n = std::min<std::size_t>(chunk, indices.size() - start);
    inputs.resize(n * options.shape.input_dim());
    labels.resize(n);
    data.fill_batch(std::span(indices).subspan(start, n), inputs, labels);
    const BatchLoss result = engine.evaluate(inputs, labels);
    totals[0] += result.loss_sum;
    totals[1] += static_cast<double>(result.correct);
  }
  channel.all_reduce_sum(totals);
  summary.eval_samples = options.eval_samples;
  const double count = static_cast<double>(std::max<std::uint64_t>(options.eval_samples, 1));
  summary.eval_loss = totals[0] / count;
  summary.eval_accuracy = totals[1] / count;
}

std::string format_number(double value) {
  char text[64];
  std::snprintf(text, sizeof text, "%.17g", value);
  return text;
}

}  // namespace

std::uint64_t sampler_world(const TrainerOptions& options, int world_size) {
  return options.reference_ranks > 0 ? options.reference_ranks
                                     : static_cast<std::uint64_t>(world_size);
}

std::uint64_t process_batch(const TrainerOptions& options) {
  return options.batch_size * std::max<std::uint64_t>(options.reference_ranks, 1);
}

RunIdentity run_identity(const TrainerOptions& options, int world_size) {
  // The sync mode and bucket size are left out on purpose: they change how gradients travel,
  // not which update is computed, so a job may resume under either.
  return {
      {"model", options.shape.describe()},
      {"seed", std::to_string(options.seed)},
      {"samples", std::to_string(options.samples)},
      {"batch_per_rank", std::to_string(options.batch_size)},
      {"data_parallel_ranks", std::to_string(sampler_world(options, world_size))},
      {"drop_last", options.drop_last ? "true" : "false"},
      {"optimizer", optimizer_name(options.optimizer.kind)},
      {"learning_rate", format_number(options.optimizer.learning_rate)},
      {"momentum", format_number(options.optimizer.momentum)},
  };
}

TrainResult train(const TrainerOptions& options, bootstrap::Communicator& comm, Engine& engine,
                  std::ostream& out) {
  const int rank = comm.rank();
  const int world = comm.size();
  if (options.reference_ranks > 0 && world != 1) {
    throw_invalid("--reference-ranks runs in a single process; launch it with 1 rank, not " +
                  std::to_string(world));
  }
  if (engine.uses_device_memory() == false && comm.backend() == bootstrap::Backend::kNccl) {
    throw_invalid("the NCCL backend needs --device cuda");
  }
  HostChannel channel(comm, engine);
  RankLog log(options.log_dir, rank, out);

  const SyntheticDataset data(
      {options.seed, options.samples, options.shape.input_dim(), options.shape.classes()});
  SamplerSpec sampler{
      options.samples,  sampler_world(options, world), options.batch_size, options.seed, true,
      options.drop_last};
  validate(sampler);
  const std::uint64_t steps_in_epoch = steps_per_epoch(sampler);
  std::uint64_t total_steps = options.epochs * steps_in_epoch;
  if (options.max_steps > 0) total_steps = std::min(total_steps, options.max_steps);
  std::vector<std::uint64_t> my_ranks;
  if (options.reference_ranks > 0) {
    for (std::uint64_t r = 0; r < options.reference_ranks; ++r) my_ranks.push_back(r);
  } else {
    my_ranks.push_back(static_cast<std::uint64_t>(rank));
  }

  if (steps_optimizer(options.sync, rank)) engine.enable_optimizer(options.optimizer);
  const auto bucket_bytes = static_cast<std::size_t>(options.bucket_mb * 1024.0 * 1024.0);
  GradientSync sync(options.sync, comm, engine, std::max<std::size_t>(bucket_bytes, 1));
  const std::size_t parameter_count = engine.layout().total();

  log.line("dtrain-trainer: rank " + std::to_string(rank) + "/" + std::to_string(world) + " on " +
               hostname() + ", model " + options.shape.describe() + " (" +
               std::to_string(parameter_count) + " parameters), sync " + sync_name(options.sync) +
               ", " + std::to_string(sync.buckets().size()) + " bucket(s), device " +
               engine.name() + ", backend " + bootstrap::backend_name(comm.backend()) +
               ", global batch " + std::to_string(options.batch_size * sampler.world_size) + ", " +
               std::to_string(steps_in_epoch) + " steps/epoch, " + std::to_string(total_steps) +
               " steps",
           true);

  // Initial state: from the checkpoint when there is one, else from the seed, and in both
  // cases rank 0's copy wins (DDP broadcasts the module's parameters at construction).
  std::uint64_t first_step = 0;
  std::optional<TrainState> resumed;
  if (!options.checkpoint_dir.empty()) resumed = load_and_share(options, channel, log);
  if (resumed) {
    const std::string mismatch = identity_mismatch(resumed->identity, run_identity(options, world));
    if (!mismatch.empty()) {
      throw_invalid("the checkpoint in " + options.checkpoint_dir +
                    " was written by a different configuration (" + mismatch +
                    "); resume with the same flags or use another --checkpoint-dir");
    }
    if (resumed->params.size() != parameter_count || resumed->step > total_steps ||
        resumed->epoch * steps_in_epoch + resumed->step_in_epoch != resumed->step) {
      throw_invalid("the checkpoint in " + options.checkpoint_dir +
                    " does not fit this run (parameters, step or epoch disagree)");
    }
    engine.copy_from_host(engine.params(), resumed->params.data(), parameter_count * sizeof(float));
    if (sync.steps_optimizer()) engine.write_optimizer_state(resumed->optimizer);
    first_step = resumed->step;
    resumed.reset();  // free the host copy before training
  } else {
    std::vector<float> initial(parameter_count);
    init_parameters(options.shape, options.seed, initial);
    engine.copy_from_host(engine.params(), initial.data(), parameter_count * sizeof(float));
  }
  channel.broadcast_floats(engine.params(), parameter_count, 0);

  RunSummary summary;
  summary.world_size = static_cast<std::uint64_t>(world);
  summary.sync = options.reference_ranks > 0 ? "reference" : sync_name(options.sync);
  summary.device = engine.name();
  summary.backend = bootstrap::backend_name(comm.backend());
  summary.model = options.shape.describe();
  summary.parameters = parameter_count;
  summary.optimizer = optimizer_name(options.optimizer.kind);
  summary.global_batch = options.batch_size * sampler.world_size;
  summary.bucket_mb = options.bucket_mb;
  summary.buckets = sync.buckets().size();
  summary.first_step = first_step;
  summary.total_steps = total_steps;
  summary.baseline = options.baseline;
  summary.final_train_loss = std::nan("");

  PhaseTotals totals;
  PhaseTotals interval;
  double interval_loss[2] = {0, 0};  // loss sum, samples
  std::uint64_t interval_steps = 0;
  std::uint64_t order_epoch = UINT64_MAX;
  std::vector<std::uint64_t> order;
  const std::uint64_t batch = process_batch(options);
  std::vector<float> inputs(batch * options.shape.input_dim());
  std::vector<std::int32_t> labels(batch);

  for (std::uint64_t step = first_step; step < total_steps; ++step) {
    const auto step_start = Clock::now();
    const double communication_before = sync.communication_seconds();
    const std::uint64_t epoch = step / steps_in_epoch;
    if (epoch != order_epoch) {
      order = epoch_order(sampler, epoch);
      order_epoch = epoch;
    }
    const std::vector<std::uint64_t> indices =
        step_indices(sampler, order, step % steps_in_epoch, my_ranks);
    data.fill_batch(indices, inputs, labels);
    const BatchLoss loss = engine.forward_backward(inputs, labels, sync.layer_ready_hook());
    sync.finish_and_step();
    const double busy = seconds_since(step_start);
    double communication = sync.communication_seconds() - communication_before;
    interval_loss[0] += loss.loss_sum;
    interval_loss[1] += static_cast<double>(labels.size());
    ++interval_steps;
    const std::uint64_t done = step + 1;

    if (done % options.log_every == 0 || done == total_steps) {
      const auto log_start = Clock::now();
      channel.all_reduce_sum(interval_loss);
      communication += seconds_since(log_start);
      const double mean_loss = interval_loss[0] / interval_loss[1];
      summary.final_train_loss = mean_loss;
      const double wall_so_far = interval.wall + seconds_since(step_start);
      const double samples_per_sec =
          static_cast<double>(interval_steps * summary.global_batch) / wall_so_far;
      log.line(format_progress(done, total_steps, mean_loss, samples_per_sec,
                               (interval.communication + communication) / wall_so_far));
      interval = PhaseTotals{};
      interval_loss[0] = interval_loss[1] = 0;
      interval_steps = 0;
    }
    if (!options.checkpoint_dir.empty() &&
        ((options.checkpoint_every > 0 && done % options.checkpoint_every == 0) ||
         done == total_steps)) {
      checkpoint(options, channel, engine, done, steps_in_epoch, log);
    }
    const double wall = seconds_since(step_start);
    for (PhaseTotals* t : {&totals, &interval}) {
      t->compute += busy - (sync.communication_seconds() - communication_before);
      t->communication += communication;
      t->wall += wall;
    }
    if (interval_steps == 0) interval = PhaseTotals{};
  }
  summary.steps_run = total_steps - first_step;

  evaluate(options, data, engine, channel, summary);

  std::vector<float> final_params(parameter_count);
  engine.copy_to_host(final_params.data(), engine.params(), parameter_count * sizeof(float));
  const std::uint64_t hash = parameter_hash(final_params);
  const std::vector<std::uint64_t> hashes = channel.all_gather(hash);
  TrainResult result;
  result.hashes_agree = true;
  for (std::uint64_t h : hashes) result.hashes_agree = result.hashes_agree && h == hash;
  summary.parameter_hash = hex64(hash);

  const double mine[4] = {totals.compute, totals.communication, totals.wall, peak_rss_kib()};
  const std::vector<double> gathered = channel.all_gather(mine);
  for (int r = 0; r < world; ++r) {
    const double* f = gathered.data() + 4 * static_cast<std::size_t>(r);
    summary.ranks.push_back(RankFigures{PhaseTotals{f[0], f[1], f[2]}, f[3]});
  }

  if (result.hashes_agree) {
    log.line("parameter hash agreed on " + std::to_string(world) + " ranks: " + hex64(hash));
  } else {
    std::string text = "dtrain: parameter hashes differ between ranks:";
    for (std::size_t r = 0; r < hashes.size(); ++r) {
      text += " rank " + std::to_string(r) + " " + hex64(hashes[r]);
    }
    log.line(text);
  }
  log.line(format_summary(summary));
  if (options.expect_loss) {
    result.loss_reached = summary.eval_loss <= *options.expect_loss;
    char text[160];
    std::snprintf(text, sizeof text, "%seval loss %.4f %s --expect-loss %.4f",
                  result.loss_reached ? "" : "dtrain: ", summary.eval_loss,
                  result.loss_reached ? "reached" : "did not reach", *options.expect_loss);
    log.line(text);
  }
  if (rank == 0) {
    if (!options.json_path.empty()) {
      const std::string text = to_json(summary).dump(2) + "\n";
      write_file_atomically(options.json_path,
                            std::as_bytes(std::span<const char>(text.data(), text.size())));
    }
    if (!options.save_params_path.empty()) {
      write_file_atomically(
          options.save_params_path,
          encode_checkpoint(capture_state(engine, options, world, total_steps, steps_in_epoch)));
    }
  }
  result.summary = std::move(summary);
  return result;
}

}  // namespace dtrain::trainer
