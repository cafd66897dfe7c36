// SPDX-License-Identifier: Apache-2.0
#pragma once
// A synthetic, learnable classification set: inputs are standard normal vectors, the label is
// the argmax of a fixed random linear "teacher". Sample i is a pure function of (seed, i), so
// every rank generates its own shard without any I/O and the set is identical everywhere.

#include <cstdint>
#include <span>
#include <vector>

namespace dtrain::trainer {

struct DatasetSpec {
  std::uint64_t seed = 0;
  std::uint64_t train_samples = 0;
  std::size_t input_dim = 0;
  std::size_t classes = 0;
};

class SyntheticDataset {
 public:
  explicit SyntheticDataset(const DatasetSpec& spec);

  const DatasetSpec& spec() const { return spec_; }

  // Writes sample `index` into x (input_dim floats) and returns its label. Indices at or past
  // train_samples form the held-out evaluation set.
  std::int32_t sample(std::uint64_t index, std::span<float> x) const;

  // Fills a row-major batch (indices.size() x input_dim) and its labels.
  void fill_batch(std::span<const std::uint64_t> indices, std::span<float> inputs,
                  std::span<std::int32_t> labels) const;

 private:
  DatasetSpec spec_;
  std::vector<float> teacher_;  // classes x input_dim
};

}  // namespace dtrain::trainer
