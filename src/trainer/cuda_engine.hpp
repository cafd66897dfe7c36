// SPDX-License-Identifier: Apache-2.0
#pragma once
// The GPU engine: the same model and optimizer as the CPU engine, on one CUDA device, with
// cuBLAS for the matrix products and small kernels for bias, ReLU, softmax cross-entropy and
// the optimizer. Built only when the CUDA toolkit is found; this header has no CUDA types.

#include <memory>

#include "trainer/engine.hpp"

namespace dtrain::trainer {

// Devices this process can see; 0 without a driver or device.
int cuda_device_count();

// device < 0: use the current device (the NCCL bootstrap has already selected it);
// otherwise device % cuda_device_count(). Throws dtrain::Error when there is no device.
std::unique_ptr<Engine> make_cuda_engine(const MlpShape& shape, std::size_t max_batch, int device);

}  // namespace dtrain::trainer
