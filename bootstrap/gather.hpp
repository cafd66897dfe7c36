// SPDX-License-Identifier: Apache-2.0
#pragma once
// The bootstrap's one all-to-all exchange of small fixed-size blocks, done so that it leaves
// each rank connected to few peers.

#include <mpi.h>

#include <cstddef>
#include <string>

#include "bootstrap/deadline.hpp"

namespace dtrain::bootstrap {

// Throws dtrain::Error(kInternal) naming `step` when `size` blocks of `bytes` do not fit in one
// MPI message (an int count of bytes).
void require_one_message(std::size_t bytes, int size, const std::string& step);

// Collective over `comm`: every rank's `bytes` bytes from `mine`, in rank order, into `all`
// (bytes * size) on every rank, as a gather to rank 0 and a broadcast from it.
//
// Not MPI_Iallgather: Open MPI 4.1's libnbc runs it linearly, every rank sending to every
// other, so each rank would leave the bootstrap holding a transport connection to every peer
// (over TCP at 1000 ranks, 999 sockets each, all watched by Open MPI's poll()-based progress).
// Through rank 0 only rank 0 holds a connection to everyone (as its arrival count already
// needs); the others talk to it and to their broadcast-tree neighbours.
void allgather_through_root(const void* mine, int bytes, void* all, MPI_Comm comm,
                            const DeadlineWaiter& wait, const std::string& step);

}  // namespace dtrain::bootstrap
