// SPDX-License-Identifier: Apache-2.0
// A rank for dtrain's fault-injection tests: every rank runs the bootstrap and a loop of
// all_reduce calls, except that the victim rank kills itself with SIGKILL at a chosen moment,
// as a crash or the OOM killer would (no destructor, no MPI_Finalize, no message).
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.hpp"
#include "core/error.hpp"
#include "core/parse.hpp"

namespace {

using dtrain::bootstrap::DataType;
using dtrain::bootstrap::ReduceOp;

// Before init there is no MPI rank yet: the plugin's DTRAIN_RANK says who this task is.
unsigned rank_from_plugin() {
  const char* rank = std::getenv("DTRAIN_RANK");
  if (rank == nullptr) {
    dtrain::throw_invalid(
        "DTRAIN_RANK is unset, so the victim cannot be chosen before the bootstrap; launch "
        "with srun --distributed-train");
  }
  return static_cast<unsigned>(dtrain::core::parse_unsigned(rank, "DTRAIN_RANK", 0, 1u << 30));
}

void die() {
  std::fflush(nullptr);
  raise(SIGKILL);
}

int run(int argc, char** argv, unsigned victim, const std::string& when, unsigned iterations,
        unsigned die_at) {
  if (when == "before-init" && rank_from_plugin() == victim) die();

  auto session = dtrain::bootstrap::init(argc, argv);
  const auto rank = static_cast<unsigned>(session->rank());
  if (victim >= static_cast<unsigned>(session->size())) {
    dtrain::throw_invalid("--victim " + std::to_string(victim) + " is not a rank of this " +
                          std::to_string(session->size()) + "-rank job");
  }
  // 1 MiB per call: large enough that every call moves data between the nodes.
  std::vector<float> send(1 << 18, 1.0F), recv(send.size());
  for (unsigned i = 0; i < iterations; ++i) {
    if (when == "during-all-reduce" && rank == victim && i == die_at) die();
    session->communicator().all_reduce(send.data(), recv.data(), send.size(), DataType::kFloat32,
                                       ReduceOp::kSum);
  }
  std::printf("dtrain-fault-rank: rank %u finished %u all_reduce calls\n", rank, iterations);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "dtrain-fault-rank: bootstrap, then a loop of all_reduce calls; the --victim rank "
      "SIGKILLs itself --when before-init (before calling the bootstrap) or "
      "during-all-reduce (while the others are in all_reduce call --die-at). Launch with "
      "srun --distributed-train --mpi=pmix."};
  unsigned victim = 0, iterations = 1000, die_at = 10;
  std::string when = "before-init";
  app.add_option("--victim", victim, "rank that kills itself")->required();
  app.add_option("--when", when, "before-init or during-all-reduce")
      ->check(CLI::IsMember({"before-init", "during-all-reduce"}));
  app.add_option("--iterations", iterations, "all_reduce calls of 1 MiB")
      ->check(CLI::Range(1u, 1u << 30));
  app.add_option("--die-at", die_at, "the call the victim never makes (during-all-reduce)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& help) {
    return app.exit(help);
  } catch (const CLI::ParseError& error) {
    std::fprintf(stderr, "dtrain: dtrain-fault-rank: %s\n", error.what());
    return 2;
  }
  if (when == "during-all-reduce" && die_at >= iterations) {
    std::fprintf(stderr, "dtrain: dtrain-fault-rank: --die-at %u must be below --iterations %u\n",
                 die_at, iterations);
    return 2;
  }
  try {
    return run(argc, argv, victim, when, iterations, die_at);
  } catch (const dtrain::Error& error) {
    std::fprintf(stderr, "dtrain: %s\n", error.what());
    return 1;
  }
}
