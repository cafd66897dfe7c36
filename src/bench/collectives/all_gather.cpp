// SPDX-License-Identifier: Apache-2.0
#include "bench/collectives/collective.hpp"

namespace dtrain::bootstrap::collectives {

namespace {

// The sweep size is the gathered total; each rank contributes count/nranks.
Counts counts(std::size_t count, int nranks) {
  const std::size_t per_rank = count / static_cast<std::size_t>(nranks);
  return {per_rank, per_rank * static_cast<std::size_t>(nranks), per_rank, per_rank, 0};
}

void init_data(const DataSetup& s, HostData& data) {
  const std::size_t n = s.counts.param_count;
  size_buffer(data.input, s.type, n);
  fill_input(s.type, std::nullopt, s.rank, 0, n, s.rep, s.nranks, data.input);
  size_buffer(data.expected, s.type, s.counts.recv_count);
  for (int peer = 0; peer < s.nranks; ++peer) {
    fill_input(s.type, std::nullopt, peer, 0, n, s.rep, s.nranks, data.expected,
               static_cast<std::size_t>(peer) * n);
  }
}

Bandwidth bandwidth(std::size_t count, std::size_t type_size, double seconds, int nranks) {
  const double algbw =
      static_cast<double>(count * type_size * static_cast<std::size_t>(nranks)) / 1.0e9 / seconds;
  return {algbw, algbw * (nranks - 1) / nranks};
}

void run(Communicator& comm, const void* send, void* recv, std::size_t count, DataType type,
         ReduceOp /*op*/, int /*root*/) {
  comm.all_gather(send, recv, count, type);
}

}  // namespace

const CollectiveTest& all_gather_test() {
  static const CollectiveTest test{.name = "all_gather",
                                   .uses_op = false,
                                   .uses_root = false,
                                   .in_place_checked = true,
                                   .counts = counts,
                                   .init_data = init_data,
                                   .bandwidth = bandwidth,
                                   .run = run};
  return test;
}

}  // namespace dtrain::bootstrap::collectives
