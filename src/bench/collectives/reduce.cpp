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
  fill_input(s.type, s.op, s.rank, 0, n, s.rep, s.nranks, data.input);
  data.checked = s.rank == s.root;
  size_buffer(data.expected, s.type, n);
  if (!data.checked) return;
  fill_expected(s.type, s.op, 0, n, s.rep, s.nranks, data.expected);
}

Bandwidth bandwidth(std::size_t count, std::size_t type_size, double seconds, int /*nranks*/) {
  const double algbw = static_cast<double>(count * type_size) / 1.0e9 / seconds;
  return {algbw, algbw};
}

void run(Communicator& comm, const void* send, void* recv, std::size_t count, DataType type,
         ReduceOp op, int root) {
  comm.reduce(send, recv, count, type, op, root);
}

}  // namespace

const CollectiveTest& reduce_test() {
  static const CollectiveTest test{.name = "reduce",
                                   .uses_op = true,
                                   .uses_root = true,
                                   .in_place_checked = true,
                                   .counts = counts,
                                   .init_data = init_data,
                                   .bandwidth = bandwidth,
                                   .run = run};
  return test;
}

}  // namespace dtrain::bootstrap::collectives
