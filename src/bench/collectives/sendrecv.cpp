// SPDX-License-Identifier: Apache-2.0
#include "bench/collectives/collective.hpp"

namespace dtrain::bootstrap::collectives {

namespace {

Counts counts(std::size_t count, int /*nranks*/) {
  return {count, count, count, 0, 0};
}

void init_data(const DataSetup& s, HostData& data) {
  const std::size_t n = s.counts.param_count;
  size_buffer(data.input, s.type, n);
  fill_input(s.type, std::nullopt, s.rank, 0, n, s.rep, s.nranks, data.input);
  size_buffer(data.expected, s.type, n);
  fill_input(s.type, std::nullopt, (s.rank - 1 + s.nranks) % s.nranks, 0, n, s.rep, s.nranks,
             data.expected);
}

Bandwidth bandwidth(std::size_t count, std::size_t type_size, double seconds, int /*nranks*/) {
  const double algbw = static_cast<double>(count * type_size) / 1.0e9 / seconds;
  return {algbw, algbw};
}

void run(Communicator& comm, const void* send, void* recv, std::size_t count, DataType type,
         ReduceOp /*op*/, int /*root*/) {
  comm.send_recv_ring(send, recv, count, type);
}

}  // namespace

const CollectiveTest& sendrecv_test() {
  static const CollectiveTest test{.name = "sendrecv",
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
