// SPDX-License-Identifier: Apache-2.0
#pragma once
// The MPI backend: host buffers, one MPI call per collective, no staging copies. In-place calls
// (NCCL's convention: send == recv, or send/recv at this rank's block) map to MPI_IN_PLACE.
// half and bfloat16 travel as MPI_UINT16_T and reduce through user-defined MPI_Ops; avg is
// a sum followed by a division by the world size on the receiving ranks (integer division for
// int32, as NCCL does).

#include <mpi.h>

#include <memory>
#include <string>

#include "bootstrap/communicator.hpp"

namespace dtrain::bootstrap {

// Throws dtrain::Error naming `call` and MPI's error text unless `rc` is MPI_SUCCESS (for
// communicators whose error handler returns).
void check_mpi(int rc, const std::string& call);

// Duplicates `parent`; the communicator owns the duplicate.
std::unique_ptr<Communicator> make_mpi_communicator(MPI_Comm parent);
// Takes `owned`, a communicator made for it (the bootstrap's MPI_Comm_idup), and frees it.
std::unique_ptr<Communicator> adopt_mpi_communicator(MPI_Comm owned);

}  // namespace dtrain::bootstrap
