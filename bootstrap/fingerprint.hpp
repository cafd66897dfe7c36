// SPDX-License-Identifier: Apache-2.0
#pragma once
// What every rank must agree on before training starts: the same executable built against
// the same dtrain, MPI, NCCL and CUDA, on the same GPU model. Pure comparison and reporting;
// collection lives in fingerprint_probe.cpp.

#include <string>
#include <utility>
#include <vector>

#include "bootstrap/rank_set.hpp"

namespace dtrain::bootstrap {

struct Fingerprint {
  std::string executable_hash;  // XXH3_64bits of /proc/self/exe, hex
  std::string dtrain_version;
  std::string mpi_library;   // MPI_Get_library_version, first line
  std::string nccl_version;  // "none" when built without NCCL
  std::string cuda_runtime;  // "none" when built without CUDA
  std::string cuda_driver;   // "none" when no driver is loaded
  std::string gpu_model;     // "none" when no GPU is visible
};

struct FingerprintField {
  const char* label;
  std::string Fingerprint::*member;
};
const std::vector<FingerprintField>& fingerprint_fields();

// "0-2,5,7-8" for a sorted list of ranks.
std::string format_rank_set(const std::vector<int>& ranks);

// Empty when all ranks agree. Otherwise a table with one row per distinct value of each
// differing field and the ranks that hold it, e.g.
//   field            value             ranks
//   executable hash  3f2a9c0d11e4b7a5  0-2,4-7
//                    91c0e2ab7730f1d2  3
std::string fingerprint_mismatch_table(const std::vector<Fingerprint>& by_rank);
// The same table from groups of ranks that each hold one fingerprint (a group of every rank but
// a few costs as much as the few).
std::string fingerprint_mismatch_table(const std::vector<std::pair<Fingerprint, RankSet>>& groups);

}  // namespace dtrain::bootstrap
