// SPDX-License-Identifier: Apache-2.0
#include "bench/collectives/collective.hpp"

namespace dtrain::bootstrap::collectives {

namespace {

// The sweep size is each rank's whole send buffer; every peer gets count/nranks of it.
Counts counts(std::size_t count, int nranks) {
  const std::size_t per_peer = count / static_cast<std::size_t>(nranks);
  const std::size_t total = per_peer * static_cast<std::size_t>(nranks);
  return {total, total, per_peer, 0, 0};
}

void init_data(const DataSetup& s, HostData& data) {
  const std::size_t n = s.counts.param_count;
  size_buffer(data.input, s.type, s.counts.send_count);
  fill_input(s.type, std::nullopt, s.rank, 0, s.counts.send_count, s.rep, s.nranks, data.input);
  size_buffer(data.expected, s.type, s.counts.recv_count);
  for (int peer = 0; peer < s.nranks; ++peer) {
    // Block `rank` of the peer's send buffer lands in block `peer` of ours.
    fill_input(s.type, std::nullopt, peer, static_cast<std::size_t>(s.rank) * n, n, s.rep, s.nranks,
               data.expected, static_cast<std::size_t>(peer) * n);
  }
}

Bandwidth bandwidth(std::size_t count, std::size_t type_size, double seconds, int nranks) {
  const double algbw =
      static_cast<double>(count * static_cast<std::size_t>(nranks) * type_size) / 1.0e9 / seconds;
  return {algbw, algbw * (nranks - 1) / nranks};
}

void run(Communicator& comm, const void* send, void* recv, std::size_t count, DataType type,
         ReduceOp /*op*/, int /*root*/) {
  comm.all_to_all(send, recv, count, type);
}

}  // namespace

const CollectiveTest& alltoall_test() {
  static const CollectiveTest test{.name = "alltoall",
                                   .uses_op = false,
                                   .uses_root = false,
                                   .in_place_checked = false,
                                   .counts = counts,
                                   .init_data = init_data,
                                   .bandwidth = bandwidth,
                                   .run = run};
  return test;
}

}  // namespace dtrain::bootstrap::collectives
