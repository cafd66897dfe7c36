// SPDX-License-Identifier: Apache-2.0
#pragma once
// The model: a multi-layer perceptron (Linear -> ReLU -> ... -> Linear) with softmax
// cross-entropy. Parameters live in ONE flat float buffer in registration order
// W0, b0, W1, b1, ... (as nn.Module.parameters() lists them), gradients in a second buffer with
// the same layout. Because DDP buckets take tensors in reverse registration order, every bucket
// is then one contiguous range of the gradient buffer.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace dtrain::trainer {

struct MlpShape {
  std::vector<std::size_t> widths;  // input, hidden..., classes
  std::size_t layers() const { return widths.size() - 1; }
  std::size_t input_dim() const { return widths.front(); }
  std::size_t classes() const { return widths.back(); }
  std::string describe() const;  // "256-1024-1024-10"
};

struct TensorRange {
  std::size_t offset = 0;  // in floats
  std::size_t count = 0;
};

class ParamLayout {
 public:
  explicit ParamLayout(const MlpShape& shape);
  const std::vector<TensorRange>& tensors() const { return tensors_; }
  const TensorRange& weight(std::size_t layer) const { return tensors_[2 * layer]; }
  const TensorRange& bias(std::size_t layer) const { return tensors_[2 * layer + 1]; }
  static std::size_t layer_of_tensor(std::size_t tensor) { return tensor / 2; }
  std::size_t total() const { return total_; }

 private:
  std::vector<TensorRange> tensors_;
  std::size_t total_ = 0;
};

// Kaiming-uniform weights (bound 1/sqrt(fan_in), torch.nn.Linear's default) and zero biases,
// a pure function of the seed.
void init_parameters(const MlpShape& shape, std::uint64_t seed, std::span<float> params);

// Called during backward once a layer's weight and bias gradients are final.
using LayerReadyFn = std::function<void(std::size_t layer)>;

struct BatchLoss {
  double loss_sum = 0;  // sum of per-sample losses
  std::size_t correct = 0;
};

// The CPU implementation: activations are kept in a workspace sized for `max_batch`.
class CpuMlp {
 public:
  CpuMlp(MlpShape shape, std::size_t max_batch);

  const MlpShape& shape() const { return shape_; }
  const ParamLayout& layout() const { return layout_; }

  // Forward and backward over a batch; writes d(mean loss)/d(params) into grads and calls
  // on_layer_ready(l) for l = L-1 .. 0 as soon as layer l's gradients are complete.
  BatchLoss forward_backward(std::span<const float> params, std::span<float> grads,
                             std::span<const float> inputs, std::span<const std::int32_t> labels,
                             const LayerReadyFn& on_layer_ready);

  BatchLoss evaluate(std::span<const float> params, std::span<const float> inputs,
                     std::span<const std::int32_t> labels);

 private:
  std::size_t forward(std::span<const float> params, std::span<const float> inputs,
                      std::size_t batch);

  MlpShape shape_;
  ParamLayout layout_;
  std::size_t max_batch_;
  std::vector<std::vector<float>> activations_;  // activations_[l]: output of layer l
  std::vector<float> delta_;                     // gradient w.r.t. current layer output
  std::vector<float> delta_prev_;
};

}  // namespace dtrain::trainer
