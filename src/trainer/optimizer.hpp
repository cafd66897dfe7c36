// SPDX-License-Identifier: Apache-2.0
#pragma once
// SGD (with optional momentum, torch.optim.SGD semantics) and Adam (torch.optim.Adam, no weight
// decay) over flat buffers. The optimizer state is plain data so that checkpoints can carry it.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace dtrain::trainer {

enum class OptimizerKind : std::uint32_t { kSgd = 0, kAdam = 1 };

const char* optimizer_name(OptimizerKind kind);

struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::kAdam;
  double learning_rate = 1e-3;
  double momentum = 0.9;  // SGD only; 0 disables the momentum buffer
  double beta1 = 0.9;     // Adam
  double beta2 = 0.999;   // Adam
  double epsilon = 1e-8;  // Adam
};

struct OptimizerState {
  std::uint64_t steps = 0;
  std::vector<float> first;   // SGD momentum buffer or Adam exp_avg
  std::vector<float> second;  // Adam exp_avg_sq
};

// How many parameter-sized state vectors the optimizer keeps (0, 1 or 2).
std::size_t state_vector_count(const OptimizerConfig& config);

OptimizerState make_optimizer_state(const OptimizerConfig& config, std::size_t parameters);

// The per-step scalars shared by the CPU and GPU implementations, computed in double once.
struct StepScalars {
  float learning_rate = 0;  // Adam: already includes the bias corrections of the step
  float momentum = 0;
  float beta1 = 0;
  float beta2 = 0;
  float epsilon = 0;  // Adam: already scaled by sqrt(1 - beta2^t)
  bool first_step = false;
};
StepScalars step_scalars(const OptimizerConfig& config, std::uint64_t step_number);

// Applies one update; increments state.steps.
void optimizer_step(const OptimizerConfig& config, OptimizerState& state, std::span<float> params,
                    std::span<const float> grads);

}  // namespace dtrain::trainer
