// SPDX-License-Identifier: Apache-2.0
// dtrain-bench: nccl-tests' *_perf over dtrain's bootstrap and collective backends.
#include <mpi.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "bench/collectives/collective.hpp"
#include "bench/plot.hpp"
#include "bench/plot_input.hpp"
#include "bench/sweep.hpp"
#include "bench/timing.hpp"
#include "bootstrap/bootstrap.hpp"
#include "bootstrap/buffer.hpp"
#include "core/error.hpp"
#include "trainer/checkpoint_store.hpp"

namespace {

using namespace dtrain;
using bootstrap::BackendBuffer;
using bootstrap::DataType;
using bootstrap::ReduceOp;
using bootstrap::collectives::CollectiveTest;

struct Options {
  bench::SweepSpec sweep;
  std::vector<std::uint64_t> sizes;
  int iters = 20;
  int warmup = 5;
  int check = 1;
  std::vector<DataType> types;
  std::vector<ReduceOp> ops;
  int root = 0;
  bench::TimeAverage average = bench::TimeAverage::kMean;
  std::vector<const CollectiveTest*> collectives;
  bootstrap::Backend backend = bootstrap::Backend::kMpi;
  std::string json_path;
  std::string plot_path;
  bench::Chart compared;  // the --compare files' curves, read before the sweep
  bool bootstrap_only = false;
};

// Shows where a long sweep is, on stderr and only for a person watching a terminal.
class Progress {
 public:
  explicit Progress(bool enabled) : enabled_(enabled && isatty(STDERR_FILENO) != 0) {}
  void update(const std::string& what) {
    if (!enabled_) return;
    if (std::chrono::steady_clock::now() - start_ < std::chrono::seconds(3)) return;
    std::fprintf(stderr, "\r\033[Kdtrain-bench: %s", what.c_str());
    shown_ = true;
  }
  void finish() {
    if (shown_) std::fprintf(stderr, "\r\033[K");
    shown_ = false;
  }

 private:
  bool enabled_;
  bool shown_ = false;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

class Runner {
 public:
  Runner(const Options& options, bootstrap::Session& session)
      : o_(options),
        session_(session),
        comm_(session.communicator()),
        progress_(session.rank() == 0) {}

  // Returns the total #wrong.
  std::int64_t run_all(nlohmann::json& report) {
    std::int64_t wrong = 0;
    for (const CollectiveTest* test : o_.collectives) {
      std::vector<bench::Row> rows = run_collective(*test);
      const auto summary = bench::summarize(rows);
      wrong += summary.wrong;
      if (session_.rank() == 0) {
        std::printf("%s#\n", bench::format_footer(summary).c_str());
        std::fflush(stdout);
      }
      report["collectives"].push_back(to_json(*test, rows, summary));
    }
    return wrong;
  }

 private:
  std::vector<bench::Row> run_collective(const CollectiveTest& test) {
    const int n = comm_.size();
    if (session_.rank() == 0) {
      std::printf("# Collective %s, backend %s\n%s", test.name,
                  bootstrap::backend_name(comm_.backend()), bench::table_header().c_str());
      std::fflush(stdout);
    }
    std::vector<bench::Row> rows;
    for (DataType type : o_.types) {
      const std::size_t ts = bootstrap::type_size(type);
      const auto largest = test.counts(o_.sizes.back() / ts, n);
      const std::size_t bytes = std::max(largest.send_count, largest.recv_count) * ts;
      BackendBuffer send(comm_.backend(), bytes);
      BackendBuffer recv(comm_.backend(), bytes);
      // The host images are reserved once per sweep, as the device buffers are, so that no
      // allocation between timed runs changes the process's memory state.
      host_.input.reserve(bytes);
      host_.expected.reserve(bytes);
      got_.reserve(bytes);
      const std::vector<ReduceOp> ops = test.uses_op ? o_.ops : std::vector{ReduceOp::kSum};
      for (ReduceOp op : ops) {
        for (std::size_t i = 0; i < o_.sizes.size(); ++i) {
          progress_.update(std::string(test.name) + " " + bootstrap::type_name(type) + " " +
                           std::to_string(o_.sizes[i]) + " B (" + std::to_string(i + 1) + "/" +
                           std::to_string(o_.sizes.size()) + ")");
          const auto counts = test.counts(o_.sizes[i] / ts, n);
          bench::Row row;
          row.size = std::max(counts.send_count, counts.recv_count) * ts;
          row.count = counts.param_count;
          row.type = bootstrap::type_name(type);
          row.redop = test.uses_op ? bootstrap::op_name(op) : "none";
          row.root = test.uses_root ? o_.root : -1;
          row.out_of_place = measure(test, type, op, counts, false, send, recv);
          row.in_place = measure(test, type, op, counts, true, send, recv);
          progress_.finish();
          if (session_.rank() == 0) {
            std::printf("%s", bench::format_row(row).c_str());
            std::fflush(stdout);
          }
          rows.push_back(row);
        }
      }
    }
    return rows;
  }

  bench::Measurement measure(const CollectiveTest& test, DataType type, ReduceOp op,
                             const bootstrap::collectives::Counts& counts, bool in_place,
                             BackendBuffer& send, BackendBuffer& recv) {
    const std::size_t ts = bootstrap::type_size(type);
    const auto rank = static_cast<std::size_t>(comm_.rank());
    const std::size_t send_offset = in_place ? counts.send_inplace_offset * rank * ts : 0;
    const std::size_t recv_offset = in_place ? counts.recv_inplace_offset * rank * ts : 0;
    BackendBuffer& send_buffer = in_place ? recv : send;
    std::byte* send_ptr = send_buffer.data() + send_offset;
    std::byte* recv_ptr = recv.data() + recv_offset;
    bootstrap::collectives::DataSetup setup{type,         op, o_.root, comm_.rank(),
                                            comm_.size(), 99, counts};
    // Every send and receive pointer of this size, in place or not, stays within these bytes.
    const std::size_t used_bytes = std::max(counts.send_count, counts.recv_count) * ts;

    const auto prepare = [&](int rep) -> const bootstrap::collectives::HostData& {
      setup.rep = rep;
      host_.checked = true;
      test.init_data(setup, host_);
      recv.zero(used_bytes);
      send_buffer.upload(send_offset, host_.input.data(), host_.input.size());
      return host_;
    };
    const auto run_once = [&] {
      test.run(comm_, send_ptr, recv_ptr, counts.param_count, type, op, o_.root);
    };
    if (o_.check) prepare(99);
    for (int i = 0; i < o_.warmup; ++i) run_once();
    comm_.synchronize();
    const double local =
        bench::seconds_per_iteration(o_.iters, run_once, [&] { comm_.synchronize(); });
    const double seconds = bench::combine_across_ranks(local, o_.average);

    bench::Measurement m;
    m.time_us = seconds * 1e6;
    const auto bw = test.bandwidth(counts.param_count, ts, seconds, comm_.size());
    m.algbw = bw.algbw;
    m.busbw = bw.busbw;
    if (o_.check == 0 || (in_place && !test.in_place_checked)) return m;
    std::int64_t wrong = 0;
    for (int c = 0; c < o_.check && wrong == 0; ++c) {
      const auto& data = prepare(++rep_);
      run_once();
      comm_.synchronize();
      std::int64_t local_wrong = 0;
      if (data.checked) {
        got_.resize(data.expected.size());
        recv.download(recv_offset, got_.data(), got_.size());
        local_wrong = static_cast<std::int64_t>(bootstrap::collectives::count_wrong(
            type, got_.data(), data.expected.data(), data.expected.size() / ts));
      }
      MPI_Allreduce(&local_wrong, &wrong, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    }
    m.wrong = wrong;
    return m;
  }

  nlohmann::json to_json(const CollectiveTest& test, const std::vector<bench::Row>& rows,
                         const bench::Summary& summary) {
    const auto measurement = [](const bench::Measurement& m) {
      return nlohmann::json{{"time_us", m.time_us},
                            {"algbw", m.algbw},
                            {"busbw", m.busbw},
                            {"wrong", m.wrong ? nlohmann::json(*m.wrong) : nlohmann::json()}};
    };
    nlohmann::json out = {{"collective", test.name}, {"rows", nlohmann::json::array()}};
    for (const auto& row : rows) {
      out["rows"].push_back({{"size", row.size},
                             {"count", row.count},
                             {"type", row.type},
                             {"redop", row.redop},
                             {"root", row.root},
                             {"out_of_place", measurement(row.out_of_place)},
                             {"in_place", measurement(row.in_place)}});
    }
    out["avg_busbw"] = summary.avg_busbw;
    out["peak_busbw"] = summary.peak_busbw;
    out["peak_size"] = summary.peak_size;
    out["wrong"] = summary.wrong;
    return out;
  }

  const Options& o_;
  bootstrap::Session& session_;
  bootstrap::Communicator& comm_;
  Progress progress_;
  int rep_ = 100;
  bootstrap::collectives::HostData host_;
  std::vector<std::byte> got_;
};

void print_devices(bootstrap::Session& session) {
  constexpr int kName = 64;
  char mine[kName] = {};
  std::snprintf(mine, sizeof mine, "%s", session.hostname().c_str());
  std::vector<char> names(static_cast<std::size_t>(kName * session.size()));
  std::vector<int> pids(static_cast<std::size_t>(session.size()));
  const int pid = static_cast<int>(getpid());
  MPI_Gather(mine, kName, MPI_CHAR, names.data(), kName, MPI_CHAR, 0, MPI_COMM_WORLD);
  MPI_Gather(&pid, 1, MPI_INT, pids.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (session.rank() != 0) return;
  std::printf("#\n# Using devices\n");
  for (int r = 0; r < session.size(); ++r) {
    std::printf("#  Rank %2d Pid %7d on %s (%s)\n", r, pids[static_cast<std::size_t>(r)],
                names.data() + static_cast<std::ptrdiff_t>(r) * kName,
                bootstrap::backend_name(session.communicator().backend()));
  }
  std::printf("#\n");
}

int report_bootstrap(bootstrap::Session& session, nlohmann::json& report) {
  const auto& t = session.timings();
  // Each phase's slowest rank; the phases of different ranks overlap in time, so their maxima
  // need not add up to the slowest total.
  const std::pair<const char*, double> phases[] = {
      {"mpi_init_s", t.mpi_init}, {"arrival_s", t.arrival},     {"placement_s", t.placement},
      {"verdict_s", t.verdict},   {"preflight_s", t.preflight}, {"communicator_s", t.communicator},
      {"total_s", t.total}};
  constexpr std::size_t kPhases = std::size(phases);
  double local[kPhases];
  double slowest[kPhases] = {};
  for (std::size_t i = 0; i < kPhases; ++i) local[i] = phases[i].second;
  MPI_Reduce(local, slowest, static_cast<int>(kPhases), MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  if (session.rank() == 0) {
    std::printf(
        "# bootstrap time (each the max over %d ranks): total %.6f s; MPI_Init %.6f, arrival "
        "and records %.6f, placement %.6f, verdict %.6f, preflight %.6f, communicator %.6f\n",
        session.size(), slowest[6], slowest[0], slowest[1], slowest[2], slowest[3], slowest[4],
        slowest[5]);
  }
  nlohmann::json doc = {{"ranks", session.size()}};
  for (std::size_t i = 0; i < kPhases; ++i) doc[phases[i].first] = slowest[i];
  report["bootstrap"] = doc;
  return 0;
}

// A directory that rank 0 cannot write to is found before the sweep, not after it.
void check_plot_directory(const std::string& plot_path) {
  const auto directory = std::filesystem::path(plot_path).parent_path();
  const std::string shown = directory.empty() ? "." : directory.string();
  if (::access(shown.c_str(), W_OK | X_OK) != 0) {
    throw_invalid("--plot " + plot_path + ": cannot write to the directory " + shown + " (" +
                  std::strerror(errno) + ")");
  }
}

void write_plot(const Options& o, const nlohmann::json& report) {
  bench::Chart chart = bench::busbw_chart_from_report(report, "this run", "");
  chart.title = "dtrain-bench busbw, " + std::to_string(report.at("ranks").get<int>()) +
                " ranks, " + bootstrap::backend_name(o.backend) + " backend";
  bench::merge_chart(chart, o.compared, "--compare");
  const std::string svg = bench::render_svg(chart);
  trainer::write_file_atomically(o.plot_path, std::as_bytes(std::span(svg)));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "dtrain-bench: collective benchmark in the style of nccl-tests, run through "
      "dtrain's bootstrap (environment, fingerprint and connectivity checks) and its "
      "MPI or NCCL backend. Launch one process per rank (srun --distributed-train, "
      "srun --mpi=pmix or mpirun)."};
  std::string min_bytes = "32M", max_bytes = "32M", step_bytes = "1M";
  std::uint64_t step_factor = 1;
  std::string datatype = "float", redop = "sum", collective = "all_reduce", backend = "mpi";
  int average = 1;
  double timeout_s = 0;
  std::optional<int> keep_freed_memory;
  bool allow_mismatch = false;
  Options o;
  app.add_option("-b,--minbytes", min_bytes, "smallest size (bytes; K, M, G suffixes)")
      ->capture_default_str();
  app.add_option("-e,--maxbytes", max_bytes, "largest size")->capture_default_str();
  app.add_option("-f,--stepfactor", step_factor, "multiply the size by this (>1)")
      ->capture_default_str();
  app.add_option("-i,--stepbytes", step_bytes, "add this many bytes when -f is 1")
      ->capture_default_str();
  app.add_option("-n,--iters", o.iters, "timed iterations per size")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 30));
  app.add_option("-w,--warmup_iters", o.warmup, "untimed iterations before timing")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 30));
  app.add_option("-c,--check", o.check, "correctness checks per size (0: none)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000));
  app.add_option("-d,--datatype", datatype, "float, double, int32, half, bfloat16 or all")
      ->capture_default_str();
  app.add_option("-o,--redop", redop, "sum, prod, min, max, avg or all")->capture_default_str();
  app.add_option("-r,--root", o.root, "root rank of broadcast and reduce")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("-a,--average", average,
                 "time reported: 0 rank 0's, 1 mean, 2 minimum, 3 maximum over ranks")
      ->capture_default_str()
      ->check(CLI::Range(0, 3));
  app.add_option("--op", collective,
                 "all_reduce, all_gather, reduce_scatter, broadcast, reduce, alltoall, "
                 "sendrecv or all")
      ->capture_default_str();
  app.add_option("--backend", backend, "mpi (host buffers) or nccl (GPU buffers)")
      ->capture_default_str();
  app.add_option("--json", o.json_path, "also write the results as JSON to this file (rank 0)");
  std::vector<std::string> compare_paths;
  auto* plot = app.add_option("--plot", o.plot_path,
                              "also draw busbw against message size as an SVG chart in this file "
                              "(rank 0; one line per collective and in-place mode)");
  app.add_option("--compare", compare_paths,
                 "draw this file's curves on the same --plot axes: an earlier run's --json "
                 "output, or nccl-tests' (or dtrain-bench's) printed output; may be repeated")
      ->needs(plot);
  app.add_flag("--allow-mismatch", allow_mismatch,
               "only warn when ranks run different binaries or library versions");
  app.add_option("--timeout", timeout_s,
                 "bootstrap deadline in seconds (default DTRAIN_BOOTSTRAP_TIMEOUT or 60)")
      ->check(CLI::PositiveNumber);
  app.add_option("--keep-freed-memory", keep_freed_memory,
                 "1: serve MPI's scratch buffers from a heap that is never trimmed, so they "
                 "stay resident between calls; 0: glibc's default (default "
                 "DTRAIN_KEEP_FREED_MEMORY or 1)")
      ->check(CLI::Range(0, 1));
  app.add_flag("--bootstrap-only", o.bootstrap_only,
               "only bootstrap and report how long it took (max over ranks)")
      ->excludes(plot);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& help) {
    return app.exit(help);
  } catch (const CLI::ParseError& error) {
    std::fprintf(stderr, "dtrain: dtrain-bench: %s (see --help)\n", error.what());
    return 2;
  }

  bootstrap::BootstrapConfig config;
  try {
    o.sweep = {bench::parse_size(min_bytes, "-b/--minbytes"),
               bench::parse_size(max_bytes, "-e/--maxbytes"), step_factor,
               bench::parse_size(step_bytes, "-i/--stepbytes")};
    o.sizes = bench::sweep_sizes(o.sweep);
    o.types = bench::parse_datatypes(datatype);
    o.ops = bench::parse_reduce_ops(redop);
    o.average = static_cast<bench::TimeAverage>(average);
    if (collective == "all") {
      o.collectives = bootstrap::collectives::all_collective_tests();
    } else if (const auto* test = bootstrap::collectives::find_collective_test(collective)) {
      o.collectives = {test};
    } else {
      throw_invalid("--op '" + collective +
                    "' is not known; use all_reduce, all_gather, "
                    "reduce_scatter, broadcast, reduce, alltoall, sendrecv or all");
    }
    if (backend == "mpi") {
      o.backend = bootstrap::Backend::kMpi;
    } else if (backend == "nccl") {
      o.backend = bootstrap::Backend::kNccl;
    } else {
      throw_invalid("--backend '" + backend + "' is not known; use mpi or nccl");
    }
    // Every rank reads them, before MPI starts, so that a wrong file ends the job at once.
    o.compared = {"", bench::kSizeLabel, bench::kBusbwLabel, bench::TickFormat::kBytes, {}};
    for (const auto& path : compare_paths) {
      bench::merge_chart(o.compared, bench::load_chart_file(path), path);
    }
    config.backend = o.backend;
    config.allow_mismatch = allow_mismatch;
    if (keep_freed_memory) config.keep_freed_memory = *keep_freed_memory == 1;
    if (timeout_s > 0) {
      config.timeout = std::chrono::milliseconds(static_cast<long long>(timeout_s * 1000));
    }
  } catch (const Error& error) {
    std::fprintf(stderr, "dtrain: dtrain-bench: %s\n", error.what());
    return 2;
  }

  std::unique_ptr<bootstrap::Session> session;
  try {
    session = bootstrap::init(argc, argv, config);
  } catch (const bootstrap::NodeFaultError& error) {
    std::fprintf(stderr, "dtrain: %s\n", error.what());
    return bootstrap::kExitNodeFault;
  } catch (const Error& error) {
    std::fprintf(stderr, "dtrain: %s\n", error.what());
    return 1;
  }
  try {
    if (o.root >= session->size()) {
      throw_invalid("-r/--root " + std::to_string(o.root) + " is not a rank of this job (" +
                    std::to_string(session->size()) + " ranks)");
    }
    if (session->rank() == 0 && !o.plot_path.empty()) check_plot_directory(o.plot_path);
    nlohmann::json report = {{"tool", "dtrain-bench"},
                             {"backend", bootstrap::backend_name(o.backend)},
                             {"ranks", session->size()},
                             {"iters", o.iters},
                             {"warmup_iters", o.warmup},
                             {"keeps_freed_memory", session->keeps_freed_memory()},
                             {"collectives", nlohmann::json::array()}};
    report_bootstrap(*session, report);
    std::int64_t wrong = 0;
    if (!o.bootstrap_only) {
      if (session->rank() == 0) {
        std::printf(
            "# dtrain-bench minBytes %llu maxBytes %llu step: %llu(%s) warmup iters: %d "
            "iters: %d validation: %d\n",
            static_cast<unsigned long long>(o.sweep.min_bytes),
            static_cast<unsigned long long>(o.sweep.max_bytes),
            static_cast<unsigned long long>(o.sweep.step_factor > 1 ? o.sweep.step_factor
                                                                    : o.sweep.step_bytes),
            o.sweep.step_factor > 1 ? "factor" : "bytes", o.warmup, o.iters, o.check);
        std::printf("# heap: %s\n",
                    session->keeps_freed_memory()
                        ? "freed memory kept (DTRAIN_KEEP_FREED_MEMORY=0 returns it)"
                        : "the allocator's default (freed memory may go back to the system)");
      }
      print_devices(*session);
      Runner runner(o, *session);
      wrong = runner.run_all(report);
    }
    if (session->rank() == 0 && !o.json_path.empty()) {
      std::ofstream out(o.json_path);
      out << report.dump(2) << "\n";
      if (!out) throw Error(ErrorKind::kResource, "cannot write --json " + o.json_path);
    }
    if (session->rank() == 0 && !o.plot_path.empty()) write_plot(o, report);
    if (wrong > 0) {
      if (session->rank() == 0) {
        std::fprintf(stderr, "dtrain: dtrain-bench: %lld elements were wrong\n",
                     static_cast<long long>(wrong));
      }
      return 1;
    }
    return 0;
  } catch (const Error& error) {
    // Other ranks may be inside a collective: end the whole job, not just this rank.
    std::fprintf(stderr, "dtrain: %s: %s\n",
                 bootstrap::describe_self(session->rank(), session->hostname()).c_str(),
                 error.what());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    return 1;
  }
}
