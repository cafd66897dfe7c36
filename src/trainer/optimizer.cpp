// SPDX-License-Identifier: Apache-2.0
#include "trainer/optimizer.hpp"

#include <cmath>

#include "core/error.hpp"

namespace dtrain::trainer {

const char* optimizer_name(OptimizerKind kind) {
  return kind == OptimizerKind::kSgd ? "sgd" : "adam";
}

std::size_t state_vector_count(const OptimizerConfig& config) {
  if (config.kind == OptimizerKind::kAdam) return 2;
  return config.momentum != 0.0 ? 1 : 0;
}

OptimizerState make_optimizer_state(const OptimizerConfig& config, std::size_t parameters) {
  OptimizerState state;
  const std::size_t vectors = state_vector_count(config);
  if (vectors >= 1) state.first.assign(parameters, 0.0f);
  if (vectors >= 2) state.second.assign(parameters, 0.0f);
  return state;
}

StepScalars step_scalars(const OptimizerConfig& config, std::uint64_t step_number) {
  StepScalars s;
  s.momentum = static_cast<float>(config.momentum);
  s.beta1 = static_cast<float>(config.beta1);
  s.beta2 = static_cast<float>(config.beta2);
  s.first_step = step_number == 1;
  s.learning_rate = static_cast<float>(config.learning_rate);
  s.epsilon = static_cast<float>(config.epsilon);
  if (config.kind == OptimizerKind::kAdam) {
    // torch's formulation: p -= lr/bc1 * m / (sqrt(v)/sqrt(bc2) + eps), rewritten as
    // p -= (lr*sqrt(bc2)/bc1) * m / (sqrt(v) + eps*sqrt(bc2)).
    const double t = static_cast<double>(step_number);
    const double bc1 = 1.0 - std::pow(config.beta1, t);
    const double bc2 = 1.0 - std::pow(config.beta2, t);
    s.learning_rate = static_cast<float>(config.learning_rate * std::sqrt(bc2) / bc1);
    s.epsilon = static_cast<float>(config.epsilon * std::sqrt(bc2));
  }
  return s;
}

void optimizer_step(const OptimizerConfig& config, OptimizerState& state, std::span<float> params,
                    std::span<const float> grads) {
  const std::size_t n = params.size();
  const std::size_t vectors = state_vector_count(config);
  if (grads.size() != n || (vectors >= 1 && state.first.size() != n) ||
      (vectors >= 2 && state.second.size() != n)) {
    throw Error(ErrorKind::kInternal, "optimizer buffers do not match the parameters");
  }
  ++state.steps;
  const StepScalars s = step_scalars(config, state.steps);
  float* p = params.data();
  const float* g = grads.data();
  if (config.kind == OptimizerKind::kSgd) {
    if (vectors == 0) {
      for (std::size_t k = 0; k < n; ++k) p[k] -= s.learning_rate * g[k];
      return;
    }
    float* m = state.first.data();
    for (std::size_t k = 0; k < n; ++k) {
      // torch initialises the buffer with the first gradient rather than decaying zero.
      m[k] = s.first_step ? g[k] : s.momentum * m[k] + g[k];
      p[k] -= s.learning_rate * m[k];
    }
    return;
  }
  float* m = state.first.data();
  float* v = state.second.data();
  const float one_minus_beta1 = 1.0f - s.beta1;
  const float one_minus_beta2 = 1.0f - s.beta2;
  for (std::size_t k = 0; k < n; ++k) {
    m[k] = s.beta1 * m[k] + one_minus_beta1 * g[k];
    v[k] = s.beta2 * v[k] + one_minus_beta2 * g[k] * g[k];
    p[k] -= s.learning_rate * m[k] / (std::sqrt(v[k]) + s.epsilon);
  }
}

}  // namespace dtrain::trainer
