// SPDX-License-Identifier: Apache-2.0
#include "bench/sweep.hpp"

#include <cstdio>

#include "core/error.hpp"
#include "core/parse.hpp"

namespace dtrain::bench {

using bootstrap::DataType;
using bootstrap::ReduceOp;

std::uint64_t parse_size(std::string_view text, std::string_view what) {
  std::uint64_t scale = 1;
  std::string_view digits = text;
  if (!text.empty()) {
    switch (text.back()) {
      case 'K':
      case 'k':
        scale = 1ull << 10;
        break;
      case 'M':
      case 'm':
        scale = 1ull << 20;
        break;
      case 'G':
      case 'g':
        scale = 1ull << 30;
        break;
      default:
        break;
    }
    if (scale != 1) digits.remove_suffix(1);
  }
  constexpr std::uint64_t kLimit = 1ull << 40;
  const auto value = core::parse_unsigned(digits, what, 0, kLimit / scale);
  return value * scale;
}

std::vector<std::uint64_t> sweep_sizes(const SweepSpec& spec) {
  if (spec.min_bytes > spec.max_bytes) {
    throw_invalid("-b/--minbytes (" + std::to_string(spec.min_bytes) +
                  ") is larger than -e/--maxbytes (" + std::to_string(spec.max_bytes) + ")");
  }
  if (spec.step_factor <= 1 && spec.step_bytes == 0 && spec.min_bytes != spec.max_bytes) {
    throw_invalid(
        "-i/--stepbytes is 0 and -f/--stepfactor is 1: the sweep would never end; "
        "give -f 2 or -i <bytes>");
  }
  if (spec.step_factor > 1 && spec.min_bytes == 0) {
    throw_invalid("-b/--minbytes 0 with -f/--stepfactor never grows; start at 1 byte or more");
  }
  std::vector<std::uint64_t> sizes;
  for (std::uint64_t size = spec.min_bytes; size <= spec.max_bytes;) {
    sizes.push_back(size);
    if (spec.min_bytes == spec.max_bytes) break;
    size = spec.step_factor > 1 ? size * spec.step_factor : size + spec.step_bytes;
  }
  return sizes;
}

std::vector<DataType> parse_datatypes(std::string_view text) {
  const std::vector<DataType> all = {DataType::kFloat32, DataType::kFloat64, DataType::kInt32,
                                     DataType::kFloat16, DataType::kBFloat16};
  if (text == "all") return all;
  for (DataType type : all) {
    if (text == bootstrap::type_name(type)) return {type};
  }
  if (text == "float32") return {DataType::kFloat32};
  if (text == "float64") return {DataType::kFloat64};
  if (text == "float16") return {DataType::kFloat16};
  if (text == "bf16") return {DataType::kBFloat16};
  throw_invalid("-d/--datatype " + core::quote_for_error(text) +
                " is not known; use float, double, int32, half, bfloat16 or all");
}

std::vector<ReduceOp> parse_reduce_ops(std::string_view text) {
  const std::vector<ReduceOp> all = {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin,
                                     ReduceOp::kMax, ReduceOp::kAvg};
  if (text == "all") return all;
  for (ReduceOp op : all) {
    if (text == bootstrap::op_name(op)) return {op};
  }
  throw_invalid("-o/--redop " + core::quote_for_error(text) +
                " is not known; use sum, prod, min, max, avg or all");
}

std::string table_header() {
  char text[1024];
  std::snprintf(text, sizeof text,
                "#%63s%s%32s\n"
                "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n"
                "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n",
                "", "out-of-place                       in-place", "", "size", "count", "type",
                "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw",
                "#wrong", "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)",
                "(GB/s)", "(GB/s)", "");
  return text;
}

namespace {

std::string format_measurement(const Measurement& m) {
  char time[32];
  if (m.time_us >= 1e7) {
    std::snprintf(time, sizeof time, "%7.0e", m.time_us);
  } else if (m.time_us >= 1e4) {
    std::snprintf(time, sizeof time, "%7.0f", m.time_us);
  } else {
    std::snprintf(time, sizeof time, "%7.2f", m.time_us);
  }
  const std::string wrong = m.wrong ? std::to_string(*m.wrong) : "N/A";
  char text[128];
  std::snprintf(text, sizeof text, "  %7s  %6.2f  %6.2f  %6s", time, m.algbw, m.busbw,
                wrong.c_str());
  return text;
}

}  // namespace

std::string format_row(const Row& row) {
  char head[128];
  std::snprintf(
      head, sizeof head, "%12llu  %12llu  %8s  %6s  %6d", static_cast<unsigned long long>(row.size),
      static_cast<unsigned long long>(row.count), row.type.c_str(), row.redop.c_str(), row.root);
  return head + format_measurement(row.out_of_place) + format_measurement(row.in_place) + "\n";
}

Summary summarize(const std::vector<Row>& rows) {
  Summary summary;
  double total = 0;
  std::size_t measured = 0;
  for (const auto& row : rows) {
    for (const bool in_place : {false, true}) {
      const Measurement& m = in_place ? row.in_place : row.out_of_place;
      total += m.busbw;
      ++measured;
      if (m.wrong) summary.wrong += *m.wrong;
      if (m.busbw > summary.peak_busbw) {
        summary.peak_busbw = m.busbw;
        summary.peak_size = row.size;
        summary.peak_in_place = in_place;
      }
    }
  }
  summary.avg_busbw = measured == 0 ? 0 : total / static_cast<double>(measured);
  return summary;
}

std::string format_footer(const Summary& summary) {
  char text[512];
  std::snprintf(text, sizeof text,
                "# Out of bounds values : %lld %s\n"
                "# Avg bus bandwidth    : %g\n"
                "# Peak bus bandwidth   : %g GB/s at %llu B (%s)\n",
                static_cast<long long>(summary.wrong), summary.wrong == 0 ? "OK" : "WRONG",
                summary.avg_busbw, summary.peak_busbw,
                static_cast<unsigned long long>(summary.peak_size),
                summary.peak_in_place ? "in-place" : "out-of-place");
  return text;
}

}  // namespace dtrain::bench
