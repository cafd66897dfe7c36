// SPDX-License-Identifier: Apache-2.0
#include "trainer/dataset.hpp"

#include <string>

#include "core/error.hpp"
#include "trainer/rng.hpp"

namespace dtrain::trainer {

SyntheticDataset::SyntheticDataset(const DatasetSpec& spec) : spec_(spec) {
  if (spec.input_dim == 0 || spec.classes < 2 || spec.train_samples == 0) {
    throw_invalid("synthetic data set needs input_dim >= 1, classes >= 2 and samples >= 1");
  }
  teacher_.resize(spec.classes * spec.input_dim);
  for (std::size_t i = 0; i < teacher_.size(); ++i) {
    teacher_[i] = static_cast<float>(standard_normal(spec.seed, RngStream::kTeacher, 0, i));
  }
}

std::int32_t SyntheticDataset::sample(std::uint64_t index, std::span<float> x) const {
  if (x.size() != spec_.input_dim) {
    throw Error(ErrorKind::kInternal, "sample buffer has " + std::to_string(x.size()) +
                                          " floats, expected " + std::to_string(spec_.input_dim));
  }
  for (std::size_t j = 0; j < x.size(); ++j) {
    x[j] = static_cast<float>(standard_normal(spec_.seed, RngStream::kSampleInput, index, j));
  }
  std::int32_t best = 0;
  double best_score = 0;
  for (std::size_t c = 0; c < spec_.classes; ++c) {
    double score = 0;
    const float* row = teacher_.data() + c * spec_.input_dim;
    for (std::size_t j = 0; j < x.size(); ++j) score += static_cast<double>(row[j]) * x[j];
    if (c == 0 || score > best_score) {
      best = static_cast<std::int32_t>(c);
      best_score = score;
    }
  }
  return best;
}

void SyntheticDataset::fill_batch(std::span<const std::uint64_t> indices, std::span<float> inputs,
                                  std::span<std::int32_t> labels) const {
  if (inputs.size() != indices.size() * spec_.input_dim || labels.size() != indices.size()) {
    throw Error(ErrorKind::kInternal, "batch buffers do not match the number of indices");
  }
  for (std::size_t n = 0; n < indices.size(); ++n) {
    labels[n] = sample(indices[n], inputs.subspan(n * spec_.input_dim, spec_.input_dim));
  }
}

}  // namespace dtrain::trainer
