// SPDX-License-Identifier: Apache-2.0
#include "trainer/model.hpp"

#include <cmath>

#include "core/error.hpp"
#include "trainer/cpu_kernels.hpp"
#include "trainer/rng.hpp"

namespace dtrain::trainer {

std::string MlpShape::describe() const {
  std::string text;
  for (std::size_t width : widths) {
    if (!text.empty()) text += '-';
    text += std::to_string(width);
  }
  return text;
}

ParamLayout::ParamLayout(const MlpShape& shape) {
  if (shape.widths.size() < 2) throw_invalid("a model needs at least an input and an output width");
  for (std::size_t l = 0; l < shape.layers(); ++l) {
    const std::size_t in = shape.widths[l];
    const std::size_t out = shape.widths[l + 1];
    tensors_.push_back({total_, out * in});
    total_ += out * in;
    tensors_.push_back({total_, out});
    total_ += out;
  }
}

void init_parameters(const MlpShape& shape, std::uint64_t seed, std::span<float> params) {
  const ParamLayout layout(shape);
  if (params.size() != layout.total()) {
    throw Error(ErrorKind::kInternal, "parameter buffer does not match the model");
  }
  for (std::size_t l = 0; l < shape.layers(); ++l) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(shape.widths[l]));
    const TensorRange& w = layout.weight(l);
    for (std::size_t k = 0; k < w.count; ++k) {
      const double u = to_unit(random_bits(seed, RngStream::kParameterInit, l, k));
      params[w.offset + k] = static_cast<float>((2.0 * u - 1.0) * bound);
    }
    const TensorRange& b = layout.bias(l);
    for (std::size_t k = 0; k < b.count; ++k) params[b.offset + k] = 0.0f;
  }
}

CpuMlp::CpuMlp(MlpShape shape, std::size_t max_batch)
    : shape_(std::move(shape)), layout_(shape_), max_batch_(max_batch) {
  std::size_t widest = 0;
  for (std::size_t l = 0; l < shape_.layers(); ++l) {
    activations_.emplace_back(max_batch_ * shape_.widths[l + 1]);
    widest = std::max(widest, shape_.widths[l + 1]);
  }
  delta_.resize(max_batch_ * widest);
  delta_prev_.resize(max_batch_ * widest);
}

std::size_t CpuMlp::forward(std::span<const float> params, std::span<const float> inputs,
                            std::size_t batch) {
  if (batch == 0 || batch > max_batch_ || inputs.size() != batch * shape_.input_dim() ||
      params.size() != layout_.total()) {
    throw Error(ErrorKind::kInternal, "forward called with mismatched buffers");
  }
  const float* x = inputs.data();
  for (std::size_t l = 0; l < shape_.layers(); ++l) {
    const std::size_t in = shape_.widths[l];
    const std::size_t out = shape_.widths[l + 1];
    float* z = activations_[l].data();
    cpu::linear_forward(x, params.data() + layout_.weight(l).offset,
                        params.data() + layout_.bias(l).offset, z, batch, in, out);
    if (l + 1 < shape_.layers()) cpu::relu_inplace(z, batch * out);
    x = z;
  }
  return batch;
}

BatchLoss CpuMlp::forward_backward(std::span<const float> params, std::span<float> grads,
                                   std::span<const float> inputs,
                                   std::span<const std::int32_t> labels,
                                   const LayerReadyFn& on_layer_ready) {
  const std::size_t batch = forward(params, inputs, labels.size());
  if (grads.size() != layout_.total()) {
    throw Error(ErrorKind::kInternal, "gradient buffer does not match the model");
  }
  BatchLoss result;
  result.loss_sum =
      cpu::softmax_cross_entropy(activations_.back().data(), labels.data(), delta_.data(), batch,
                                 shape_.classes(), &result.correct);
  for (std::size_t l = shape_.layers(); l-- > 0;) {
    const std::size_t in = shape_.widths[l];
    const std::size_t out = shape_.widths[l + 1];
    const float* layer_input = l == 0 ? inputs.data() : activations_[l - 1].data();
    cpu::linear_backward_params(layer_input, delta_.data(), grads.data() + layout_.weight(l).offset,
                                grads.data() + layout_.bias(l).offset, batch, in, out);
    if (on_layer_ready) on_layer_ready(l);
    if (l == 0) break;
    cpu::linear_backward_input(delta_.data(), params.data() + layout_.weight(l).offset,
                               delta_prev_.data(), batch, in, out);
    cpu::relu_backward_inplace(activations_[l - 1].data(), delta_prev_.data(), batch * in);
    std::swap(delta_, delta_prev_);
  }
  return result;
}

BatchLoss CpuMlp::evaluate(std::span<const float> params, std::span<const float> inputs,
                           std::span<const std::int32_t> labels) {
  const std::size_t batch = forward(params, inputs, labels.size());
  BatchLoss result;
  result.loss_sum = cpu::softmax_cross_entropy(activations_.back().data(), labels.data(), nullptr,
                                               batch, shape_.classes(), &result.correct);
  return result;
}

}  // namespace dtrain::trainer
