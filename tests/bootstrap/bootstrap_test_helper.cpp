// A second program for the bootstrap tests: a different executable (so the fingerprint check
// has something to catch) and ranks that misbehave on purpose during the bootstrap.
#include <mpi.h>
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>

#include "bootstrap/bootstrap.hpp"
#include "core/error.hpp"

namespace {

// The value Open MPI took for mpi_event_tick_rate, through the MPI tools interface.
std::string event_tick_rate() {
  int provided = 0;
  if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS) return "no MPI_T";
  std::string value = "not found";
  int count = 0;
  MPI_T_cvar_get_num(&count);
  for (int i = 0; i < count; ++i) {
    char name[256];
    int name_length = sizeof name, verbosity = 0, bind = 0, scope = 0;
    MPI_Datatype type;
    MPI_T_enum enumtype;
    if (MPI_T_cvar_get_info(i, name, &name_length, &verbosity, &type, &enumtype, nullptr, nullptr,
                            &bind, &scope) != MPI_SUCCESS ||
        std::string(name) != "mpi_event_tick_rate" || type != MPI_INT) {
      continue;
    }
    MPI_T_cvar_handle handle;
    int elements = 0, rate = 0;
    if (MPI_T_cvar_handle_alloc(i, nullptr, &handle, &elements) == MPI_SUCCESS) {
      if (MPI_T_cvar_read(handle, &rate) == MPI_SUCCESS) value = std::to_string(rate);
      MPI_T_cvar_handle_free(&handle);
    }
    break;
  }
  MPI_T_finalize();
  return value;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "dtrain-bootstrap-test-helper: a rank for dtrain's bootstrap tests. probe: "
      "bootstrap and all-reduce once; stall-after-init: MPI_Init, write the pid to "
      "--pid-file, then never arrive; die-after-init: MPI_Init, then SIGKILL itself; "
      "event-tick: bootstrap, then print Open MPI's mpi_event_tick_rate as MPI_T reads it."};
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
      std::printf("dtrain-bootstrap-test-helper: rank %d mpi_event_tick_rate %s\n", session->rank(),
                  event_tick_rate().c_str());
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
