// SPDX-License-Identifier: Apache-2.0
#include "trainer/cpu_kernels.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace dtrain::trainer::cpu {
namespace {

// Eight independent partial sums let the compiler vectorise the reduction without
// -ffast-math, and keep the order fixed.
float dot(const float* __restrict a, const float* __restrict b, std::size_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (std::size_t k = 0; k < 8; ++k) acc[k] += a[i + k] * b[i + k];
  }
  float sum = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

void axpy(float* __restrict y, float alpha, const float* __restrict x, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}

}  // namespace

void linear_forward(const float* x, const float* w, const float* b, float* z, std::size_t batch,
                    std::size_t in, std::size_t out) {
  // Row o of w stays in L1 while the whole (small) batch streams past it.
  for (std::size_t o = 0; o < out; ++o) {
    const float* w_row = w + o * in;
    for (std::size_t n = 0; n < batch; ++n) z[n * out + o] = b[o] + dot(x + n * in, w_row, in);
  }
}

void linear_backward_params(const float* x, const float* dz, float* dw, float* db,
                            std::size_t batch, std::size_t in, std::size_t out) {
  for (std::size_t o = 0; o < out; ++o) {
    float* dw_row = dw + o * in;
    std::memset(dw_row, 0, in * sizeof(float));
    float bias_grad = 0;
    for (std::size_t n = 0; n < batch; ++n) {
      const float g = dz[n * out + o];
      bias_grad += g;
      if (g != 0.0f) axpy(dw_row, g, x + n * in, in);  // ReLU zeros are common
    }
    db[o] = bias_grad;
  }
}

void linear_backward_input(const float* dz, const float* w, float* dx, std::size_t batch,
                           std::size_t in, std::size_t out) {
  std::memset(dx, 0, batch * in * sizeof(float));
  for (std::size_t o = 0; o < out; ++o) {
    const float* w_row = w + o * in;
    for (std::size_t n = 0; n < batch; ++n) {
      const float g = dz[n * out + o];
      if (g != 0.0f) axpy(dx + n * in, g, w_row, in);
    }
  }
}

void relu_inplace(float* a, std::size_t count) {
  for (std::size_t k = 0; k < count; ++k) a[k] = a[k] > 0.0f ? a[k] : 0.0f;
}

void relu_backward_inplace(const float* a, float* da, std::size_t count) {
  for (std::size_t k = 0; k < count; ++k) da[k] = a[k] > 0.0f ? da[k] : 0.0f;
}

double softmax_cross_entropy(const float* logits, const std::int32_t* labels, float* dlogits,
                             std::size_t batch, std::size_t classes, std::size_t* correct) {
  double loss_sum = 0;
  std::size_t hits = 0;
  const double inv_batch = 1.0 / static_cast<double>(batch);
  for (std::size_t n = 0; n < batch; ++n) {
    const float* row = logits + n * classes;
    const std::size_t argmax = static_cast<std::size_t>(std::max_element(row, row + classes) - row);
    const double peak = row[argmax];
    double denom = 0;
    for (std::size_t c = 0; c < classes; ++c) denom += std::exp(static_cast<double>(row[c]) - peak);
    const auto label = static_cast<std::size_t>(labels[n]);
    loss_sum += std::log(denom) - (static_cast<double>(row[label]) - peak);
    if (argmax == label) ++hits;
    if (dlogits != nullptr) {
      for (std::size_t c = 0; c < classes; ++c) {
        const double p = std::exp(static_cast<double>(row[c]) - peak) / denom;
        dlogits[n * classes + c] = static_cast<float>((p - (c == label ? 1.0 : 0.0)) * inv_batch);
      }
    }
  }
  if (correct != nullptr) *correct = hits;
  return loss_sum;
}

void scale_inplace(float* data, std::size_t count, float factor) {
  for (std::size_t k = 0; k < count; ++k) data[k] *= factor;
}

}  // namespace dtrain::trainer::cpu
