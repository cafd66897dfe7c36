// SPDX-License-Identifier: Apache-2.0
#pragma once
// Collects this process's fingerprint (fingerprint.hpp compares them). Needs MPI and CUDA, so
// it lives in dtrain_bootstrap, apart from the pure comparison.

#include "bootstrap/fingerprint.hpp"

namespace dtrain::bootstrap {

// XXH3 of /proc/self/exe, dtrain's version, MPI_Get_library_version (callable before MPI_Init
// and after MPI_Finalize), and the NCCL, CUDA and GPU fields ("none" where absent).
Fingerprint collect_fingerprint();

}  // namespace dtrain::bootstrap
