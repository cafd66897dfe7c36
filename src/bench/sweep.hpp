// SPDX-License-Identifier: Apache-2.0
#pragma once
// Pure pieces of dtrain-bench and the MPI baseline: nccl-tests' size syntax and sweep, the
// time average across ranks (-a), and the table the tools print.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bootstrap/communicator.hpp"

namespace dtrain::bench {

// "8", "64K", "32M", "1G" (K = 1024, as nccl-tests parses sizes).
std::uint64_t parse_size(std::string_view text, std::string_view what);

struct SweepSpec {
  std::uint64_t min_bytes = 32ull << 20;
  std::uint64_t max_bytes = 32ull << 20;
  std::uint64_t step_factor = 1;  // > 1: multiply; else add step_bytes
  std::uint64_t step_bytes = 1ull << 20;
};
// Throws dtrain::Error naming the flag when the sweep is empty or never ends.
std::vector<std::uint64_t> sweep_sizes(const SweepSpec& spec);

std::vector<bootstrap::DataType> parse_datatypes(std::string_view text);   // a name or "all"
std::vector<bootstrap::ReduceOp> parse_reduce_ops(std::string_view text);  // a name or "all"

// -a: 0 rank 0's time, 1 average, 2 minimum, 3 maximum over ranks.
enum class TimeAverage { kRank0 = 0, kMean = 1, kMin = 2, kMax = 3 };

struct Measurement {
  double time_us = 0;
  double algbw = 0;
  double busbw = 0;
  std::optional<std::int64_t> wrong;  // nullopt: not checked (N/A)
};

struct Row {
  std::uint64_t size = 0;
  std::uint64_t count = 0;
  std::string type;
  std::string redop;  // "none" for collectives without one
  int root = -1;
  Measurement out_of_place;
  Measurement in_place;
};

std::string table_header();
std::string format_row(const Row& row);

struct Summary {
  double avg_busbw = 0;  // over every out-of-place and in-place measurement, as nccl-tests
  double peak_busbw = 0;
  std::uint64_t peak_size = 0;
  bool peak_in_place = false;
  std::int64_t wrong = 0;
};
Summary summarize(const std::vector<Row>& rows);
std::string format_footer(const Summary& summary);

}  // namespace dtrain::bench
