// SPDX-License-Identifier: Apache-2.0
#pragma once
// The NCCL backend and the CUDA calls the rest of dtrain needs, behind a header without CUDA
// types. Built from nccl_backend.cpp when DTRAIN_HAVE_NCCL, else from nccl_unavailable.cpp,
// whose functions report clearly that this build has no NCCL.

#include <mpi.h>

#include <cstddef>
#include <memory>

#include "bootstrap/communicator.hpp"
#include "bootstrap/deadline.hpp"
#include "bootstrap/fingerprint.hpp"

namespace dtrain::bootstrap {

bool nccl_compiled_in();

// Fills nccl_version, cuda_runtime, cuda_driver and gpu_model ("none" where absent).
void probe_cuda_fingerprint(Fingerprint& fingerprint);

// Number of CUDA devices this process can use; 0 without a driver or device.
int visible_device_count();

struct NcclSetup {
  MPI_Comm comm = MPI_COMM_NULL;  // for the unique-id broadcast and the barrier
  int rank = 0;
  int size = 1;
  int device = 0;
  DeadlineWaiter wait;  // the bootstrap's, so NCCL's steps share its deadline and message
};

// Rank 0 creates the unique id; MPI_Ibcast + MPI_Ibarrier and ncclCommInitRankConfig with
// blocking = 0, each waited for through setup.wait (ncclCommAbort before the job ends on
// timeout). Throws dtrain::Error for a refused device or NCCL error.
std::unique_ptr<Communicator> make_nccl_communicator(const NcclSetup& setup);

// Device memory for the NCCL backend's buffers.
void* device_allocate(std::size_t bytes);
void device_free(void* pointer) noexcept;
void device_upload(void* device, const void* host, std::size_t bytes);
void device_download(void* host, const void* device, std::size_t bytes);
void device_zero(void* device, std::size_t bytes);

}  // namespace dtrain::bootstrap
