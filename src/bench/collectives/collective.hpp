// SPDX-License-Identifier: Apache-2.0
#pragma once
// The benchmark's view of one collective, modelled on nccl-tests' `struct testColl`: four
// functions (element counts, deterministic data with its expected result, bandwidth maths, run)
// per collective, one file each. Everything here is host-side and needs neither MPI nor a GPU,
// except run(), which only calls the Communicator interface.

#include <cstddef>
#include <optional>
#include <string_view>
#include <vector>

#include "bootstrap/communicator.hpp"

namespace dtrain::bootstrap::collectives {

// Element counts for a sweep point of `count` = size / type_size elements (nccl-tests'
// GetCollByteCount). param_count is what the collective call takes; the in-place offsets are
// per-rank strides into the receive buffer, in elements.
struct Counts {
  std::size_t send_count = 0;
  std::size_t recv_count = 0;
  std::size_t param_count = 0;
  std::size_t send_inplace_offset = 0;
  std::size_t recv_inplace_offset = 0;
};

struct Bandwidth {
  double algbw = 0;  // GB/s, 1 GB = 1e9 bytes
  double busbw = 0;
};

struct DataSetup {
  DataType type = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  int root = 0;
  int rank = 0;
  int nranks = 1;
  int rep = 0;  // varies the data between runs so stale results are caught
  Counts counts;
};

// Host images of what goes in and what must come out on this rank.
struct HostData {
  std::vector<std::byte> input;     // send_count elements, written at the send pointer
  std::vector<std::byte> expected;  // recv_count elements, compared at the receive pointer
  bool checked = true;              // false: this rank's result is not defined (non-root)
};

struct CollectiveTest {
  const char* name;       // "all_reduce", as --op spells it
  bool uses_op;           // prints the redop column; sweeps ops with -o all
  bool uses_root;         // prints the root column
  bool in_place_checked;  // false: in-place is timed but #wrong is N/A, as in nccl-tests
  Counts (*counts)(std::size_t count, int nranks);
  void (*init_data)(const DataSetup& setup, HostData& data);
  Bandwidth (*bandwidth)(std::size_t param_count, std::size_t type_size, double seconds,
                         int nranks);
  void (*run)(Communicator& comm, const void* send, void* recv, std::size_t param_count,
              DataType type, ReduceOp op, int root);
};

const CollectiveTest& all_reduce_test();
const CollectiveTest& all_gather_test();
const CollectiveTest& reduce_scatter_test();
const CollectiveTest& broadcast_test();
const CollectiveTest& reduce_test();
const CollectiveTest& alltoall_test();
const CollectiveTest& sendrecv_test();

// In the order `--op all` runs them.
const std::vector<const CollectiveTest*>& all_collective_tests();
const CollectiveTest* find_collective_test(std::string_view name);

// Deterministic data shared by every collective. Values are small integers, so that sums,
// products, minima and maxima are exact in every type (including half and bfloat16) whatever
// order a backend reduces in; only avg rounds, and the comparison tolerates that.
double input_value(DataType type, std::optional<ReduceOp> op, int rank, std::size_t index, int rep,
                   int nranks);
void store_value(DataType type, double value, std::vector<std::byte>& buffer, std::size_t index);
double load_value(DataType type, const std::byte* buffer, std::size_t index);
// Reduces input_value(...) of all ranks at `index`, as the backend must.
double expected_reduction(DataType type, ReduceOp op, std::size_t index, int rep, int nranks);
// input_value and expected_reduction repeat with this period in `index`.
std::size_t value_period(DataType type, std::optional<ReduceOp> op, int nranks);
std::vector<std::byte> make_buffer(DataType type, std::size_t count);
// Makes `buffer` `count` zeroed elements, reusing its capacity: a benchmark that reserves its
// host images once does not allocate (and fault in fresh pages) between timed runs.
void size_buffer(std::vector<std::byte>& buffer, DataType type, std::size_t count);
// Fills `count` elements of rank `rank`'s input starting at element `first`.
void fill_input(DataType type, std::optional<ReduceOp> op, int rank, std::size_t first,
                std::size_t count, int rep, int nranks, std::vector<std::byte>& buffer,
                std::size_t at = 0);
// Fills `count` elements of expected_reduction(...) starting at element `first`.
void fill_expected(DataType type, ReduceOp op, std::size_t first, std::size_t count, int rep,
                   int nranks, std::vector<std::byte>& buffer, std::size_t at = 0);
std::size_t count_wrong(DataType type, const std::byte* got, const std::byte* expected,
                        std::size_t count);

}  // namespace dtrain::bootstrap::collectives
