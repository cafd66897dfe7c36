// SPDX-License-Identifier: Apache-2.0
// A second program for the bootstrap tests: a different executable (so the fingerprint check
// has something to catch) and ranks that misbehave on purpose during the bootstrap.
#include <dlfcn.h>
#include <mpi.h>
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include "bootstrap/bootstrap.hpp"
#include "core/error.hpp"

namespace {

// The mpi_event_tick_rate MPI_Init applied: Open MPI 4.1 keeps it in its exported variable
// ompi_mpi_event_tick_rate (ompi/runtime/ompi_mpi_params.c), -1 when nothing set it. (MPI_T
// cannot tell after MPI_Init: MPI_T_init_thread registers the parameter again, from the
// environment of that moment.)
std::string event_tick_rate() {
  const auto* rate = static_cast<const int*>(dlsym(RTLD_DEFAULT, "ompi_mpi_event_tick_rate"));
  return rate != nullptr ? std::to_string(*rate) : "unknown (not Open MPI)";
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "dtrain-bootstrap-test-helper: a rank for dtrain's bootstrap tests. probe: "
      "bootstrap and all-reduce once; stall-after-init: MPI_Init, write the pid to "
      "--pid-file, then never arrive; die-after-init: MPI_Init, then SIGKILL itself; "
      "event-tick: bootstrap, then print the mpi_event_tick_rate MPI_Init applied and the "
      "variable OMPI_MCA_mpi_event_tick_rate as the program's children would inherit it."};
  std::string mode = "probe", pid_file;
  bool allow_mismatch = false;
  double timeout_s = 0;
  app.add_option("--mode", mode, "probe, stall-after-init, die-after-init or event-tick")
      ->check(CLI::IsMember({"probe", "stall-after-init", "die-after-init", "event-tick"}));
  app.add_option("--pid-file", pid_file, "where stall-after-init writes its pid");
  app.add_flag("--allow-mismatch", allow_mismatch, "only warn on fingerprint mismatch");
  app.add_option("--timeout", timeout_s, "bootstrap deadline in seconds")
      ->check(CLI::PositiveNumber);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& help) {
    return app.exit(help);
  } catch (const CLI::ParseError& error) {
    std::fprintf(stderr, "dtrain: dtrain-bootstrap-test-helper: %s\n", error.what());
    return 2;
  }
  if (mode == "stall-after-init" || mode == "die-after-init") {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    if (mode == "die-after-init") raise(SIGKILL);
    if (!pid_file.empty()) {
      const std::string partial = pid_file + ".partial";
      std::ofstream(partial) << getpid() << "\n";
      std::rename(partial.c_str(), pid_file.c_str());
    }
    std::this_thread::sleep_for(std::chrono::minutes(10));
    return 3;
  }
  dtrain::bootstrap::BootstrapConfig config;
  config.allow_mismatch = allow_mismatch;
  if (timeout_s > 0) {
    config.timeout = std::chrono::milliseconds(static_cast<long long>(timeout_s * 1000));
  }
  try {
    auto session = dtrain::bootstrap::init(argc, argv, config);
    if (mode == "event-tick") {
      const char* inherited = std::getenv("OMPI_MCA_mpi_event_tick_rate");
      std::printf("dtrain-bootstrap-test-helper: rank %d mpi_event_tick_rate %s, environment %s\n",
                  session->rank(), event_tick_rate().c_str(), inherited ? inherited : "unset");
      return 0;
    }
    int value = session->rank();
    int sum = 0;
    session->communicator().all_reduce(&value, &sum, 1, dtrain::bootstrap::DataType::kInt32,
                                       dtrain::bootstrap::ReduceOp::kSum);
    const int n = session->size();
    std::printf("dtrain-bootstrap-test-helper: rank %d ok, sum %d (expected %d)\n", session->rank(),
                sum, n * (n - 1) / 2);
    return sum == n * (n - 1) / 2 ? 0 : 1;
  } catch (const dtrain::Error& error) {
    std::fprintf(stderr, "dtrain: %s\n", error.what());
    return 1;
  }
}
