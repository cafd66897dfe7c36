// SPDX-License-Identifier: Apache-2.0
// Checks that a PMIx fence without data is a barrier across the nodes of a step, as Open MPI's
// MPI_Init relies on: after the modex fence it calls a data-less fence so that no rank sends MPI
// traffic to a peer that has not yet registered its receive callbacks.
//
// Every rank writes a marker file, then enters the data-less fence; one rank (--slow-rank) waits
// --delay-ms before it writes its marker. After the fence every rank must see every marker. A rank
// that sees one missing left the fence before that rank had entered it. The verdict is about
// order, not time: a longer delay only makes a broken fence easier to catch.
#include <pmix.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace {

namespace fs = std::filesystem;

fs::path marker(const fs::path& dir, const pmix_proc_t& proc, pmix_rank_t rank) {
  return dir / (std::string(proc.nspace) + "." + std::to_string(rank));
}

// The two fences as Open MPI 4.1 calls them: the modex with PMIX_COLLECT_DATA and a value put
// before it, then the barrier with no directive at all (Slurm checks only for the key's presence).
bool fence(const char* what, const pmix_proc_t& me, bool collect_data) {
  pmix_status_t rc = PMIX_SUCCESS;
  if (collect_data) {
    pmix_value_t value;
    PMIX_VALUE_LOAD(&value, what, PMIX_STRING);
    rc = PMIx_Put(PMIX_GLOBAL, "dtrain.barrier_check", &value);
    PMIX_VALUE_DESTRUCT(&value);
    if (rc == PMIX_SUCCESS) {
      rc = PMIx_Commit();
    }
    if (rc == PMIX_SUCCESS) {
      pmix_info_t info;
      PMIX_INFO_LOAD(&info, PMIX_COLLECT_DATA, &collect_data, PMIX_BOOL);
      rc = PMIx_Fence(nullptr, 0, &info, 1);
      PMIX_INFO_DESTRUCT(&info);
    }
  } else {
    rc = PMIx_Fence(nullptr, 0, nullptr, 0);
  }
  if (rc != PMIX_SUCCESS) {
    std::fprintf(stderr, "dtrain: rank %u: %s fence failed: %s\n", me.rank, what,
                 PMIx_Error_string(rc));
    return false;
  }
  return true;
}

std::uint32_t job_size(const pmix_proc_t& me) {
  pmix_proc_t job;
  PMIX_LOAD_PROCID(&job, me.nspace, PMIX_RANK_WILDCARD);
  pmix_value_t* value = nullptr;
  if (PMIx_Get(&job, PMIX_JOB_SIZE, nullptr, 0, &value) != PMIX_SUCCESS || value == nullptr) {
    return 0;
  }
  const std::uint32_t size = value->data.uint32;
  PMIX_VALUE_RELEASE(value);
  return size;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Checks that a data-less PMIx fence waits for every rank of the step (run under "
      "srun --mpi=pmix)."};
  std::string marker_dir;
  int slow_rank = 0;
  int delay_ms = 1000;
  app.add_option("--marker-dir", marker_dir,
                 "existing directory shared by all nodes, for one marker file per rank")
      ->required()
      ->check(CLI::ExistingDirectory);
  app.add_option("--slow-rank", slow_rank, "the rank that enters the fence late")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--delay-ms", delay_ms, "how late it enters, in milliseconds")
      ->capture_default_str()
      ->check(CLI::Range(0, 60000));
  CLI11_PARSE(app, argc, argv);

  pmix_proc_t me;
  if (const pmix_status_t rc = PMIx_Init(&me, nullptr, 0); rc != PMIX_SUCCESS) {
    std::fprintf(stderr, "dtrain: PMIx_Init failed: %s; run under srun --mpi=pmix\n",
                 PMIx_Error_string(rc));
    return 2;
  }
  const std::uint32_t size = job_size(me);
  bool ok = size > 0;
  if (!ok) {
    std::fprintf(stderr, "dtrain: rank %u: PMIx does not give the job size\n", me.rank);
  }
  if (ok && static_cast<std::uint32_t>(slow_rank) >= size) {
    std::fprintf(stderr, "dtrain: --slow-rank %d is not a rank of this %u-rank step\n", slow_rank,
                 size);
    ok = false;
  }
  // The modex fence of MPI_Init, with data; the barrier fence follows it.
  ok = ok && fence("data-collecting", me, true);
  if (ok) {
    if (me.rank == static_cast<pmix_rank_t>(slow_rank)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    }
    std::ofstream(marker(marker_dir, me, me.rank)).put('\n');
    ok = fence("data-less", me, false);
  }
  std::vector<pmix_rank_t> missing;
  for (pmix_rank_t rank = 0; ok && rank < size; ++rank) {
    if (!fs::exists(marker(marker_dir, me, rank))) {
      missing.push_back(rank);
    }
  }
  if (!missing.empty()) {
    std::string ranks;
    for (const pmix_rank_t rank : missing) {
      ranks += (ranks.empty() ? "" : ",") + std::to_string(rank);
    }
    std::fprintf(stderr,
                 "dtrain: rank %u left the data-less PMIx fence before rank(s) %s entered it: the "
                 "fence is not a barrier across nodes (Slurm's tree fence with TreeWidth above "
                 "the step's node count; set PMIxCollFence=ring in mpi.conf)\n",
                 me.rank, ranks.c_str());
    ok = false;
  } else if (ok && me.rank == 0) {
    std::printf("data-less PMIx fence held all %u ranks until rank %d arrived %d ms late\n", size,
                slow_rank, delay_ms);
  }
  PMIx_Finalize(nullptr, 0);
  return ok ? 0 : 1;
}
