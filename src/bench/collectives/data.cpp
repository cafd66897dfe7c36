// SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

#include "bench/collectives/collective.hpp"
#include "bootstrap/half.hpp"
#include "core/error.hpp"

namespace dtrain::bootstrap::collectives {

namespace {

// Largest integer a sum may reach and stay exact in the type.
double exact_limit(DataType type) {
  switch (type) {
    case DataType::kBFloat16:
      return 256;
    case DataType::kFloat16:
      return 2048;
    case DataType::kFloat32:
      return 16777216.0;
    case DataType::kFloat64:
    case DataType::kInt32:
      return 2147483647.0;
  }
  return 1;
}

double tolerance(DataType type) {
  switch (type) {
    case DataType::kInt32:
      return 0;
    case DataType::kFloat32:
      return 1e-6;
    case DataType::kFloat64:
      return 1e-12;
    case DataType::kFloat16:
      return 1e-3;
    case DataType::kBFloat16:
      return 8e-3;
  }
  return 0;
}

double combine(ReduceOp op, double a, double b) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      return a + b;
    case ReduceOp::kProd:
      return a * b;
    case ReduceOp::kMin:
      return std::min(a, b);
    case ReduceOp::kMax:
      return std::max(a, b);
  }
  return a;
}

// input_value for sum and avg is taken modulo this, so that n ranks' sum stays exact.
std::size_t sum_modulus(DataType type, int nranks) {
  return static_cast<std::size_t>(std::clamp(exact_limit(type) / std::max(nranks, 1), 1.0, 31.0)) +
         1;
}

// Writes value(i) for i in [0, count) as elements at, at+1, ... of `buffer`, computing only the
// first `period` of them: the rest repeat, so large buffers fill at memcpy speed.
template <class Value>
void fill_periodic(DataType type, std::size_t period, std::size_t count, Value&& value,
                   std::vector<std::byte>& buffer, std::size_t at) {
  const std::size_t computed = std::min(period, count);
  for (std::size_t i = 0; i < computed; ++i) store_value(type, value(i), buffer, at + i);
  const std::size_t size = type_size(type);
  std::byte* base = buffer.data() + at * size;
  for (std::size_t done = computed; done < count;) {
    // `done` is a whole number of periods, so element done + j repeats element j.
    const std::size_t chunk = std::min(done, count - done);
    std::memcpy(base + done * size, base, chunk * size);
    done += chunk;
  }
}

}  // namespace

double input_value(DataType type, std::optional<ReduceOp> op, int rank, std::size_t index, int rep,
                   int nranks) {
  const auto r = static_cast<std::size_t>(rank);
  const auto p = static_cast<std::size_t>(rep);
  if (op == ReduceOp::kSum || op == ReduceOp::kAvg) {
    return static_cast<double>((r * 3 + index * 7 + p) % sum_modulus(type, nranks));
  }
  if (op == ReduceOp::kProd) return (r + index + p) % 8 == 0 ? 2.0 : 1.0;
  return static_cast<double>((r * 13 + index * 7 + p * 5) % 251);
}

std::size_t value_period(DataType type, std::optional<ReduceOp> op, int nranks) {
  if (op == ReduceOp::kSum || op == ReduceOp::kAvg) return sum_modulus(type, nranks);
  if (op == ReduceOp::kProd) return 8;
  return 251;
}

void store_value(DataType type, double value, std::vector<std::byte>& buffer, std::size_t index) {
  std::byte* at = buffer.data() + index * type_size(type);
  switch (type) {
    case DataType::kFloat32: {
      const auto v = static_cast<float>(value);
      std::memcpy(at, &v, sizeof v);
      return;
    }
    case DataType::kFloat64:
      std::memcpy(at, &value, sizeof value);
      return;
    case DataType::kInt32: {
      const auto v = static_cast<std::int32_t>(value);
      std::memcpy(at, &v, sizeof v);
      return;
    }
    case DataType::kFloat16: {
      const auto v = float_to_half(static_cast<float>(value));
      std::memcpy(at, &v, sizeof v);
      return;
    }
    case DataType::kBFloat16: {
      const auto v = float_to_bf16(static_cast<float>(value));
      std::memcpy(at, &v, sizeof v);
      return;
    }
  }
}

double load_value(DataType type, const std::byte* buffer, std::size_t index) {
  const std::byte* at = buffer + index * type_size(type);
  switch (type) {
    case DataType::kFloat32: {
      float v;
      std::memcpy(&v, at, sizeof v);
      return v;
    }
    case DataType::kFloat64: {
      double v;
      std::memcpy(&v, at, sizeof v);
      return v;
    }
    case DataType::kInt32: {
      std::int32_t v;
      std::memcpy(&v, at, sizeof v);
      return v;
    }
    case DataType::kFloat16:
    case DataType::kBFloat16: {
      std::uint16_t v;
      std::memcpy(&v, at, sizeof v);
      return type == DataType::kFloat16 ? half_to_float(v) : bf16_to_float(v);
    }
  }
  return 0;
}

double expected_reduction(DataType type, ReduceOp op, std::size_t index, int rep, int nranks) {
  double acc = input_value(type, op, 0, index, rep, nranks);
  for (int rank = 1; rank < nranks; ++rank) {
    acc = combine(op, acc, input_value(type, op, rank, index, rep, nranks));
  }
  if (op == ReduceOp::kAvg) {
    acc /= nranks;
    if (type == DataType::kInt32) acc = std::trunc(acc);
  }
  return acc;
}

std::vector<std::byte> make_buffer(DataType type, std::size_t count) {
  return std::vector<std::byte>(count * type_size(type));
}

void size_buffer(std::vector<std::byte>& buffer, DataType type, std::size_t count) {
  buffer.assign(count * type_size(type), std::byte{0});
}

void fill_input(DataType type, std::optional<ReduceOp> op, int rank, std::size_t first,
                std::size_t count, int rep, int nranks, std::vector<std::byte>& buffer,
                std::size_t at) {
  fill_periodic(
      type, value_period(type, op, nranks), count,
      [&](std::size_t i) { return input_value(type, op, rank, first + i, rep, nranks); }, buffer,
      at);
}

void fill_expected(DataType type, ReduceOp op, std::size_t first, std::size_t count, int rep,
                   int nranks, std::vector<std::byte>& buffer, std::size_t at) {
  fill_periodic(
      type, value_period(type, op, nranks), count,
      [&](std::size_t i) { return expected_reduction(type, op, first + i, rep, nranks); }, buffer,
      at);
}

std::size_t count_wrong(DataType type, const std::byte* got, const std::byte* expected,
                        std::size_t count) {
  // Exact results (everything but avg) match byte for byte; only a difference needs the
  // element-wise comparison with its tolerance.
  if (count == 0 || std::memcmp(got, expected, count * type_size(type)) == 0) return 0;
  const double tol = tolerance(type);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < count; ++i) {
    const double g = load_value(type, got, i);
    const double e = load_value(type, expected, i);
    if (!(std::fabs(g - e) <= tol * std::max(1.0, std::fabs(e)))) ++wrong;
  }
  return wrong;
}

const std::vector<const CollectiveTest*>& all_collective_tests() {
  static const std::vector<const CollectiveTest*> tests = {
      &all_reduce_test(), &all_gather_test(), &reduce_scatter_test(), &broadcast_test(),
      &reduce_test(),     &alltoall_test(),   &sendrecv_test()};
  return tests;
}

const CollectiveTest* find_collective_test(std::string_view name) {
  for (const auto* test : all_collective_tests()) {
    if (name == test->name) return test;
  }
  return nullptr;
}

}  // namespace dtrain::bootstrap::collectives
