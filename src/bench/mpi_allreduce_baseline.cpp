// SPDX-License-Identifier: Apache-2.0
// dtrain-mpi-allreduce-baseline: a plain MPI_Allreduce loop (float, sum) over the same sizes
// and with the same timing method as dtrain-bench, for side-by-side comparison.
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <vector>

#include "bench/sweep.hpp"
#include "bench/timing.hpp"
#include "core/error.hpp"

namespace {

using namespace dtrain;

double busbw(std::uint64_t bytes, double seconds, int ranks) {
  // As nccl-tests' all_reduce: algbw * 2(n-1)/n, 1 GB = 1e9 bytes.
  return static_cast<double>(bytes) / 1e9 / seconds * 2.0 * (ranks - 1) / ranks;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "dtrain-mpi-allreduce-baseline: plain MPI_Allreduce (float, sum) timed exactly as "
      "dtrain-bench times all_reduce, printing size and busbw. With --bootstrap-only, "
      "times bare MPI_Init_thread + MPI_Bcast instead."};
  std::string min_bytes = "32M", max_bytes = "32M", step_bytes = "1M";
  std::uint64_t step_factor = 1;
  int iters = 20, warmup = 5, average = 1;
  std::string json_path;
  bool bootstrap_only = false;
  app.add_option("-b,--minbytes", min_bytes, "smallest size")->capture_default_str();
  app.add_option("-e,--maxbytes", max_bytes, "largest size")->capture_default_str();
  app.add_option("-f,--stepfactor", step_factor, "multiply the size by this")
      ->capture_default_str();
  app.add_option("-i,--stepbytes", step_bytes, "add this many bytes when -f is 1")
      ->capture_default_str();
  app.add_option("-n,--iters", iters, "timed iterations")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 30));
  app.add_option("-w,--warmup_iters", warmup, "untimed iterations")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 30));
  app.add_option("-a,--average", average, "0 rank 0, 1 mean, 2 min, 3 max over ranks")
      ->capture_default_str()
      ->check(CLI::Range(0, 3));
  app.add_option("--json", json_path, "also write the results as JSON (rank 0)");
  app.add_flag("--bootstrap-only", bootstrap_only, "time MPI_Init_thread + MPI_Bcast only");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& help) {
    return app.exit(help);
  } catch (const CLI::ParseError& error) {
    std::fprintf(stderr, "dtrain: dtrain-mpi-allreduce-baseline: %s (see --help)\n", error.what());
    return 2;
  }
  std::vector<std::uint64_t> sizes;
  try {
    sizes = bench::sweep_sizes({bench::parse_size(min_bytes, "-b/--minbytes"),
                                bench::parse_size(max_bytes, "-e/--maxbytes"), step_factor,
                                bench::parse_size(step_bytes, "-i/--stepbytes")});
  } catch (const Error& error) {
    std::fprintf(stderr, "dtrain: dtrain-mpi-allreduce-baseline: %s\n", error.what());
    return 2;
  }

  const auto started = std::chrono::steady_clock::now();
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  int token = 0;
  MPI_Bcast(&token, 1, MPI_INT, 0, MPI_COMM_WORLD);
  const double init_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  double slowest_init = 0;
  MPI_Reduce(&init_seconds, &slowest_init, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  nlohmann::json report = {{"tool", "dtrain-mpi-allreduce-baseline"},
                           {"ranks", ranks},
                           {"bootstrap", {{"total_s", slowest_init}}},
                           {"rows", nlohmann::json::array()}};
  if (rank == 0) {
    std::printf("# bare MPI_Init_thread + MPI_Bcast time (max over %d ranks): %.6f s\n", ranks,
                slowest_init);
  }
  if (!bootstrap_only) {
    const auto how = static_cast<bench::TimeAverage>(average);
    const std::size_t largest = sizes.back() / sizeof(float);
    std::vector<float> send(std::max<std::size_t>(largest, 1), 1.0f);
    std::vector<float> recv(send.size(), 0.0f);
    if (rank == 0) {
      std::printf("# %10s  %12s  %9s  %9s  %9s  %9s\n", "size", "count", "time(us)", "busbw",
                  "time(us)", "busbw");
      std::printf("# %10s  %12s  %20s  %20s\n", "(B)", "(elements)", "out-of-place (GB/s)",
                  "in-place (GB/s)");
    }
    for (std::uint64_t size : sizes) {
      const int count = static_cast<int>(size / sizeof(float));
      double seconds[2] = {};
      for (int in_place = 0; in_place < 2; ++in_place) {
        const void* source = in_place ? MPI_IN_PLACE : send.data();
        const auto run = [&] {
          MPI_Allreduce(source, recv.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        };
        for (int i = 0; i < warmup; ++i) run();
        seconds[in_place] =
            bench::combine_across_ranks(bench::seconds_per_iteration(iters, run, [] {}), how);
      }
      const std::uint64_t bytes = static_cast<std::uint64_t>(count) * sizeof(float);
      const double out_bw = busbw(bytes, seconds[0], ranks);
      const double in_bw = busbw(bytes, seconds[1], ranks);
      if (rank == 0) {
        std::printf("%12llu  %12d  %9.2f  %9.3f  %9.2f  %9.3f\n",
                    static_cast<unsigned long long>(bytes), count, seconds[0] * 1e6, out_bw,
                    seconds[1] * 1e6, in_bw);
        std::fflush(stdout);
      }
      report["rows"].push_back(
          {{"size", bytes},
           {"out_of_place", {{"time_us", seconds[0] * 1e6}, {"busbw", out_bw}}},
           {"in_place", {{"time_us", seconds[1] * 1e6}, {"busbw", in_bw}}}});
    }
  }
  if (rank == 0 && !json_path.empty()) {
    std::ofstream out(json_path);
    out << report.dump(2) << "\n";
  }
  MPI_Finalize();
  return 0;
}
