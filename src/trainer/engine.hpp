// SPDX-License-Identifier: Apache-2.0
#pragma once
// Where the model's math runs. The CPU engine keeps its buffers in host memory; the CUDA engine
// (cuda_engine.hpp, built when CUDA is found) in device memory. The training loop only sees
// this interface, plus explicit copies when a host-memory communicator (MPI) meets a device
// engine.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "trainer/model.hpp"
#include "trainer/optimizer.hpp"

namespace dtrain::trainer {

class Engine {
 public:
  virtual ~Engine() = default;
  virtual std::string name() const = 0;  // "cpu" or "cuda"
  virtual bool uses_device_memory() const = 0;
  virtual const ParamLayout& layout() const = 0;

  // Flat buffers in engine memory (see model.hpp for the layout).
  virtual float* params() = 0;
  virtual float* grads() = 0;

  virtual BatchLoss forward_backward(std::span<const float> inputs,
                                     std::span<const std::int32_t> labels,
                                     const LayerReadyFn& on_layer_ready) = 0;
  virtual BatchLoss evaluate(std::span<const float> inputs,
                             std::span<const std::int32_t> labels) = 0;

  // Ranks that never step (non-root ranks of --sync=dp) never allocate optimizer state.
  virtual void enable_optimizer(const OptimizerConfig& config) = 0;
  virtual bool has_optimizer() const = 0;
  virtual void optimizer_step() = 0;  // applies grads() to params()
  // grads() = the mean of `ranks` gradient vectors stored back to back at `blocks` (engine
  // memory), summed in rank order so that every engine rounds alike.
  virtual void average_into_grads(const float* blocks, std::size_t ranks) = 0;
  virtual OptimizerState read_optimizer_state() = 0;
  virtual void write_optimizer_state(const OptimizerState& state) = 0;

  // Byte copies between host memory and engine memory (memcpy on the CPU engine).
  virtual void copy_to_host(void* host, const void* engine, std::size_t bytes) = 0;
  virtual void copy_from_host(void* engine, const void* host, std::size_t bytes) = 0;
  // A scratch buffer in engine memory, valid until the next call.
  virtual void* scratch(std::size_t bytes) = 0;
  // Completes queued device work, so another stream (a communicator's) may read the buffers.
  virtual void wait_for_compute() = 0;
};

std::unique_ptr<Engine> make_cpu_engine(const MlpShape& shape, std::size_t max_batch);

}  // namespace dtrain::trainer
