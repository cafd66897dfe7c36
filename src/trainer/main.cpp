// SPDX-License-Identifier: Apache-2.0
// dtrain-trainer: data-parallel training of a multi-layer perceptron on a synthetic data set,
// with DDP-style bucketed gradient all-reduce or DataParallel-style naive synchronisation,
// atomic checkpoints and a throughput / step-time / memory summary.

#include <mpi.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>

#include "bootstrap/bootstrap.hpp"
#include "bootstrap/collective_deadline.hpp"
#include "core/error.hpp"
#include "core/parse.hpp"
#include "trainer/checkpoint_store.hpp"
#include "trainer/engine.hpp"
#include "trainer/train_loop.hpp"
#ifdef DTRAIN_TRAINER_HAVE_CUDA
#include "trainer/cuda_engine.hpp"
#endif

namespace {

using dtrain::Error;
using dtrain::ErrorKind;
using namespace dtrain::trainer;

// Before MPI is up, every process of the job sees the same bad flag; only the first speaks.
bool first_process_of_job() {
  for (const char* name : {"DTRAIN_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID"}) {
    if (const char* value = std::getenv(name)) return std::string(value) == "0";
  }
  return true;
}

std::vector<std::size_t> parse_widths(const std::string& text) {
  std::vector<std::size_t> widths;
  if (text.empty()) return widths;
  for (std::string_view part : dtrain::core::split(text, ',')) {
    widths.push_back(dtrain::core::parse_unsigned(part, "--hidden width", 1, 1u << 16));
  }
  return widths;
}

struct Cli {
  TrainerOptions options;
  std::size_t input_dim = 256;
  std::size_t classes = 10;
  std::string hidden = "1024,1024";
  std::string device = "cpu";
  std::string backend = "auto";
  std::string sync = "ddp";
  std::string optimizer = "adam";
  double baseline_samples_per_sec = 0;
  std::string baseline_json;
  double bootstrap_timeout = 0;
  double collective_timeout = 60;
};

void add_options(CLI::App& app, Cli& cli) {
  TrainerOptions& o = cli.options;
  app.add_option("--input-dim", cli.input_dim, "Input features per sample")
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
  app.add_option("--hidden", cli.hidden,
                 "Comma-separated hidden layer widths; empty for softmax regression")
      ->capture_default_str();
  app.add_option("--classes", cli.classes, "Output classes")
      ->check(CLI::Range(2, 1 << 16))
      ->capture_default_str();
  app.add_option("--samples", o.samples, "Training set size (synthetic, generated from --seed)")
      ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{1} << 40))
      ->capture_default_str();
  app.add_option("--eval-samples", o.eval_samples, "Held-out samples for the final loss")
      ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{1} << 30))
      ->capture_default_str();
  app.add_option("--seed", o.seed, "Seed of data, shuffling and initialisation")
      ->capture_default_str();
  app.add_option("--batch-size", o.batch_size,
                 "Samples per rank per step; the global batch is this times the world size")
      ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{1} << 20))
      ->capture_default_str();
  app.add_option("--epochs", o.epochs, "Passes over the training set (reshuffled each epoch)")
      ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{1} << 20))
      ->capture_default_str();
  app.add_option("--max-steps", o.max_steps, "Stop after this many steps (0: no limit)")
      ->capture_default_str();
  app.add_flag("--drop-last", o.drop_last,
               "Truncate the set to equal shards instead of padding it (DistributedSampler "
               "drop_last)");
  app.add_option("--optimizer", cli.optimizer, "sgd or adam")
      ->check(CLI::IsMember({"sgd", "adam"}))
      ->capture_default_str();
  app.add_option("--lr", o.optimizer.learning_rate, "Learning rate")
      ->check(CLI::Range(1e-12, 1e3))
      ->capture_default_str();
  app.add_option("--momentum", o.optimizer.momentum, "SGD momentum (0 disables it)")
      ->check(CLI::Range(0.0, 0.999999))
      ->capture_default_str();
  app.add_option("--sync", cli.sync,
                 "ddp: bucketed all-reduce overlapping backward; naive: one all-reduce after "
                 "backward, every rank steps; dp: DataParallel's shape, gather gradients to "
                 "rank 0, step there, broadcast parameters")
      ->check(CLI::IsMember({"ddp", "naive", "dp"}))
      ->capture_default_str();
  app.add_option("--bucket-mb", o.bucket_mb, "DDP bucket size in MiB")
      ->check(CLI::Range(1e-6, 1e6))
      ->capture_default_str();
  app.add_option("--device", cli.device, "cpu, or cuda (needs a GPU)")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  app.add_option("--backend", cli.backend,
                 "Collective backend: auto (nccl for --device cuda when built with NCCL, else "
                 "mpi), mpi or nccl")
      ->check(CLI::IsMember({"auto", "mpi", "nccl"}))
      ->capture_default_str();
  app.add_option("--reference-ranks", o.reference_ranks,
                 "Single-process reference: each step, train on the union of the batches that "
                 "this many ranks would see")
      ->check(CLI::Range(std::uint64_t{0}, std::uint64_t{1} << 20));
  app.add_option("--checkpoint-dir", o.checkpoint_dir,
                 "Directory for checkpoints; a run resumes from the newest valid one there");
  app.add_option("--checkpoint-every", o.checkpoint_every,
                 "Checkpoint every N steps (and at the end); 0: only at the end")
      ->capture_default_str();
  app.add_option("--log-dir", o.log_dir, "Per-rank logs node_<host>_rank_<r>.log go here");
  app.add_option("--log-every", o.log_every, "Progress line every N steps")
      ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{1} << 40))
      ->capture_default_str();
  app.add_option("--expect-loss", o.expect_loss,
                 "Exit non-zero unless the final held-out loss is at most this")
      ->check(CLI::Range(0.0, 1e6));
  app.add_option("--json", o.json_path, "Write the summary as JSON to this file (rank 0)");
  app.add_option("--save-params", o.save_params_path,
                 "Write the final state (checkpoint format) to this file (rank 0)");
  app.add_option("--baseline-samples-per-sec", cli.baseline_samples_per_sec,
                 "Throughput of a 1-rank run, for the scaling efficiency")
      ->check(CLI::Range(1e-9, 1e15));
  app.add_option("--baseline-json", cli.baseline_json,
                 "A 1-rank run's --json file, for the scaling efficiency")
      ->check(CLI::ExistingFile)
      ->excludes(app.get_option("--baseline-samples-per-sec"));
  app.add_option("--bootstrap-timeout", cli.bootstrap_timeout,
                 "Seconds allowed for the bootstrap (default: DTRAIN_BOOTSTRAP_TIMEOUT or 60)")
      ->check(CLI::Range(0.1, 86400.0));
  app.add_option("--collective-timeout", cli.collective_timeout,
                 "Seconds one collective may block before the rank reports it and exits with 75 "
                 "(a peer or the network between nodes is gone); 0: wait for ever")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 86400.0));
}

void finish_options(Cli& cli) {
  TrainerOptions& o = cli.options;
  o.shape.widths.clear();
  o.shape.widths.push_back(cli.input_dim);
  for (std::size_t width : parse_widths(cli.hidden)) o.shape.widths.push_back(width);
  o.shape.widths.push_back(cli.classes);
  o.sync = cli.sync == "ddp"     ? SyncMode::kDdp
           : cli.sync == "naive" ? SyncMode::kNaive
                                 : SyncMode::kDp;
  o.optimizer.kind = cli.optimizer == "sgd" ? OptimizerKind::kSgd : OptimizerKind::kAdam;
  if (o.checkpoint_every > 0 && o.checkpoint_dir.empty()) {
    dtrain::throw_invalid("--checkpoint-every needs --checkpoint-dir");
  }
  if (cli.device == "cpu" && cli.backend == "nccl") {
    dtrain::throw_invalid("--backend nccl needs --device cuda");
  }
  if (cli.device == "cuda") {
#ifdef DTRAIN_TRAINER_HAVE_CUDA
    if (cuda_device_count() == 0) {
      dtrain::throw_invalid(
          "--device cuda: no CUDA device is visible to this process; run on a GPU node or use "
          "--device cpu");
    }
#else
    dtrain::throw_invalid(
        "--device cuda: this dtrain-trainer was built without CUDA; rebuild where the CUDA "
        "toolkit is installed or use --device cpu");
#endif
  }
  if (cli.baseline_samples_per_sec > 0) {
    o.baseline = Baseline{cli.baseline_samples_per_sec, 1, "--baseline-samples-per-sec"};
  } else if (!cli.baseline_json.empty()) {
    const std::vector<std::byte> bytes = read_file(cli.baseline_json);
    o.baseline = baseline_from_json(
        std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size()), cli.baseline_json);
  }
  if (!o.log_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(o.log_dir, ec);
    if (!std::filesystem::is_directory(o.log_dir)) {
      dtrain::throw_invalid("--log-dir " + o.log_dir + " is not a usable directory");
    }
  }
}

dtrain::bootstrap::Backend choose_backend(const Cli& cli) {
  using dtrain::bootstrap::Backend;
  if (cli.backend == "mpi") return Backend::kMpi;
  if (cli.backend == "nccl") return Backend::kNccl;
#ifdef DTRAIN_TRAINER_HAVE_NCCL
  if (cli.device == "cuda") return Backend::kNccl;
#endif
  return Backend::kMpi;
}

std::unique_ptr<Engine> make_engine(const Cli& cli, dtrain::bootstrap::Session& session) {
  const std::size_t max_batch = process_batch(cli.options);
  if (cli.device == "cpu") return make_cpu_engine(cli.options.shape, max_batch);
#ifdef DTRAIN_TRAINER_HAVE_CUDA
  // With NCCL the bootstrap has already bound this process to its device.
  const bool bound = session.communicator().backend() == dtrain::bootstrap::Backend::kNccl;
  return make_cuda_engine(cli.options.shape, max_batch, bound ? -1 : session.local_rank());
#else
  (void)session;
  throw Error(ErrorKind::kInternal, "--device cuda passed validation in a build without CUDA");
#endif
}

}  // namespace

int main(int argc, char** argv) {
  Cli cli;
  CLI::App app{
      "dtrain-trainer: data-parallel training of an MLP on a synthetic, seeded data set.\n"
      "Launch one process per rank (srun --distributed-train, or mpirun)."};
  add_options(app, cli);
  try {
    app.parse(argc, argv);
    finish_options(cli);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    if (first_process_of_job()) std::cerr << "dtrain: " << e.what() << " (see --help)\n";
    return 2;
  } catch (const Error& e) {
    if (first_process_of_job()) std::cerr << "dtrain: " << e.what() << "\n";
    return 2;
  }

  std::unique_ptr<dtrain::bootstrap::Session> session;
  try {
    dtrain::bootstrap::BootstrapConfig config;
    config.backend = choose_backend(cli);
    if (cli.bootstrap_timeout > 0) {
      config.timeout =
          std::chrono::milliseconds(static_cast<long long>(cli.bootstrap_timeout * 1e3));
    }
    session = dtrain::bootstrap::init(argc, argv, config);
  } catch (const dtrain::bootstrap::NodeFaultError& e) {
    std::cerr << "dtrain: " << e.what() << "\n";
    return dtrain::bootstrap::kExitNodeFault;
  } catch (const Error& e) {
    std::cerr << "dtrain: " << e.what() << "\n";
    return 1;
  }
  try {
    auto engine = make_engine(cli, *session);
    // A peer that vanished would leave this rank blocked in MPI or NCCL for minutes, or for ever.
    std::unique_ptr<dtrain::bootstrap::Communicator> watched;
    dtrain::bootstrap::Communicator* comm = &session->communicator();
    if (cli.collective_timeout > 0) {
      watched = dtrain::bootstrap::with_collective_deadline(
          *comm, std::chrono::milliseconds(static_cast<long long>(cli.collective_timeout * 1e3)),
          dtrain::bootstrap::describe_self(session->rank(), session->hostname()));
      comm = watched.get();
    }
    const TrainResult result = train(cli.options, *comm, *engine, std::cout);
    return result.exit_code();
  } catch (const Error& e) {
    // Bad input and mismatches are detected identically on every rank, so rank 0 speaks for
    // all and the job ends cleanly; anything else may be local to one rank, whose peers could
    // be blocked in a collective, so that rank ends the whole job.
    const bool collective =
        e.kind() == ErrorKind::kInvalidInput || e.kind() == ErrorKind::kMismatch;
    if (!collective || session->rank() == 0) {
      std::cerr << "dtrain: "
                << (collective
                        ? ""
                        : dtrain::bootstrap::describe_self(session->rank(), session->hostname()) +
                              ": ")
                << e.what() << "\n";
    }
    if (!collective) MPI_Abort(MPI_COMM_WORLD, 1);
    return 1;
  }
}
