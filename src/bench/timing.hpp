// SPDX-License-Identifier: Apache-2.0
#pragma once
// The one timing method shared by dtrain-bench and the plain MPI baseline, so that their
// numbers are comparable: barrier, `iters` back-to-back calls, wait for completion, divide;
// then combine the per-rank times as nccl-tests' -a does.

#include <mpi.h>

#include <chrono>

#include "bench/sweep.hpp"

namespace dtrain::bench {

template <class Run, class Wait>
double seconds_per_iteration(int iters, Run&& run, Wait&& wait) {
  MPI_Barrier(MPI_COMM_WORLD);
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) run();
  wait();
  const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
  return elapsed.count() / iters;
}

inline double combine_across_ranks(double seconds, TimeAverage how) {
  double result = seconds;
  switch (how) {
    case TimeAverage::kRank0:
      MPI_Bcast(&result, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
      break;
    case TimeAverage::kMean: {
      int size = 1;
      MPI_Comm_size(MPI_COMM_WORLD, &size);
      MPI_Allreduce(&seconds, &result, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
      result /= size;
      break;
    }
    case TimeAverage::kMin:
      MPI_Allreduce(&seconds, &result, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
      break;
    case TimeAverage::kMax:
      MPI_Allreduce(&seconds, &result, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      break;
  }
  return result;
}

}  // namespace dtrain::bench
