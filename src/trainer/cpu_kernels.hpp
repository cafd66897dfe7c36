// SPDX-License-Identifier: Apache-2.0
#pragma once
// Dense float kernels for the CPU path. Every loop has a fixed summation order, so results are
// bitwise reproducible run to run (a resumed run must equal an uninterrupted one). Row-major;
// weights are [out][in] as in torch.nn.Linear.

#include <cstddef>
#include <cstdint>

namespace dtrain::trainer::cpu {

// z[n][o] = b[o] + sum_i x[n][i] * w[o][i]
void linear_forward(const float* x, const float* w, const float* b, float* z, std::size_t batch,
                    std::size_t in, std::size_t out);

// dw[o][i] = sum_n dz[n][o] * x[n][i];  db[o] = sum_n dz[n][o]   (overwrites dw, db)
void linear_backward_params(const float* x, const float* dz, float* dw, float* db,
                            std::size_t batch, std::size_t in, std::size_t out);

// dx[n][i] = sum_o dz[n][o] * w[o][i]   (overwrites dx)
void linear_backward_input(const float* dz, const float* w, float* dx, std::size_t batch,
                           std::size_t in, std::size_t out);

void relu_inplace(float* a, std::size_t count);
// da[k] = 0 where the activation a[k] was clipped.
void relu_backward_inplace(const float* a, float* da, std::size_t count);

// Mean softmax cross-entropy over the batch; writes d(mean loss)/d(logits) into dlogits when it
// is not null. Returns the SUM of per-sample losses (callers divide), and counts correct argmax.
double softmax_cross_entropy(const float* logits, const std::int32_t* labels, float* dlogits,
                             std::size_t batch, std::size_t classes, std::size_t* correct);

void scale_inplace(float* data, std::size_t count, float factor);

}  // namespace dtrain::trainer::cpu
