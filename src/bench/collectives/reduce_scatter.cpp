// SPDX-License-Identifier: Apache-2.0
#include "bench/collectives/collective.hpp"

namespace dtrain::bootstrap::collectives {

namespace {

// The sweep size is the reduced input; each rank receives count/nranks.
Counts counts(std::size_t count, int nranks) {
  const std::size_t per_rank = count / static_cast<std::size_t>(nranks);
  return {per_rank * static_cast<std::size_t>(nranks), per_rank, per_rank, 0, per_rank};
}

void init_data(const DataSetup& s, HostData& data) {
  const std::size_t n = s.counts.param_count;
  size_buffer(data.input, s.type, s.counts.send_count);
  fill_input(s.type, s.op, s.rank, 0, s.counts.send_count, s.rep, s.nranks, data.input);
  size_buffer(data.expected, s.type, n);
  const std::size_t first = static_cast<std::size_t>(s.rank) * n;
  fill_expected(s.type, s.op, first, n, s.rep, s.nranks, data.expected);
}

Bandwidth bandwidth(std::size_t count, std::size_t type_size, double seconds, int nranks) {
  const double algbw =
      static_cast<double>(count * type_size * static_cast<std::size_t>(nranks)) / 1.0e9 / seconds;
  return {algbw, algbw * (nranks - 1) / nranks};
}

void run(Communicator& comm, const void* send, void* recv, std::size_t count, DataType type,
         ReduceOp op, int /*root*/) {
  comm.reduce_scatter(send, recv, count, type, op);
}

}  // namespace

const CollectiveTest& reduce_scatter_test() {
  static const CollectiveTest test{.name = "reduce_scatter",
                                   .uses_op = true,
                                   .uses_root = false,
                                   .in_place_checked = true,
                                   .counts = counts,
                                   .init_data = init_data,
                                   .bandwidth = bandwidth,
                                   .run = run};
  return test;
}

}  // namespace dtrain::bootstrap::collectives
