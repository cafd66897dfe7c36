// SPDX-License-Identifier: Apache-2.0
#include "bootstrap/gather.hpp"

#include <climits>
#include <cstring>
#include <string>

#include "bootstrap/mpi_communicator.hpp"
#include "core/error.hpp"

namespace dtrain::bootstrap {

void require_one_message(std::size_t bytes, int size, const std::string& step) {
  if (bytes * static_cast<std::size_t>(size) > INT_MAX) {
    throw Error(ErrorKind::kInternal, step + ": " + std::to_string(size) + " blocks of " +
                                          std::to_string(bytes) + " bytes exceed one MPI message");
  }
}

void allgather_through_root(const void* mine, int bytes, void* all, MPI_Comm comm,
                            const DeadlineWaiter& wait, const std::string& step) {
  int rank = 0, size = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  require_one_message(static_cast<std::size_t>(bytes), size, step);
  MPI_Request request;
  if (rank == 0) {
    std::memcpy(all, mine, static_cast<std::size_t>(bytes));
    check_mpi(MPI_Igather(MPI_IN_PLACE, bytes, MPI_BYTE, all, bytes, MPI_BYTE, 0, comm, &request),
              step + ": MPI_Igather");
  } else {
    check_mpi(MPI_Igather(mine, bytes, MPI_BYTE, nullptr, 0, MPI_BYTE, 0, comm, &request),
              step + ": MPI_Igather");
  }
  wait_for_requests(wait, {&request, 1}, step);
  if (size < 2) return;
  check_mpi(MPI_Ibcast(all, bytes * size, MPI_BYTE, 0, comm, &request), step + ": MPI_Ibcast");
  wait_for_requests(wait, {&request, 1}, step);
}

}  // namespace dtrain::bootstrap
