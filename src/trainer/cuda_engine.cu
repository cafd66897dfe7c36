// SPDX-License-Identifier: Apache-2.0
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "trainer/cuda_engine.hpp"

namespace dtrain::trainer {
namespace {

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    throw Error(ErrorKind::kResource, std::string(what) + ": " + cudaGetErrorString(status));
  }
}

void check(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    throw Error(ErrorKind::kResource, std::string(what) + " failed with cuBLAS status " +
                                          std::to_string(static_cast<int>(status)));
  }
}

template <typename T>
class DeviceArray {
 public:
  DeviceArray() = default;
  explicit DeviceArray(std::size_t count) { resize(count); }
  ~DeviceArray() { cudaFree(data_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  void resize(std::size_t count) {
    if (count <= count_) return;
    cudaFree(data_);
    data_ = nullptr;
    check(cudaMalloc(reinterpret_cast<void**>(&data_), count * sizeof(T)), "cudaMalloc");
    count_ = count;
  }
  T* get() const { return data_; }
  void swap_with(DeviceArray& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(count_, other.count_);
  }
  std::size_t size() const { return count_; }

 private:
  T* data_ = nullptr;
  std::size_t count_ = 0;
};

constexpr int kThreads = 256;
unsigned blocks_for(std::size_t n) {
  return static_cast<unsigned>((n + kThreads - 1) / kThreads);
}

__global__ void add_bias_kernel(float* z, const float* b, std::size_t batch, std::size_t out,
                                bool relu) {
  const std::size_t k = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (k >= batch * out) return;
  const float v = z[k] + b[k % out];
  z[k] = relu ? fmaxf(v, 0.0f) : v;
}

// One thread per output unit, summing the batch in order: deterministic.
__global__ void bias_grad_kernel(const float* dz, float* db, std::size_t batch, std::size_t out) {
  const std::size_t o = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (o >= out) return;
  float sum = 0.0f;
  for (std::size_t n = 0; n < batch; ++n) sum += dz[n * out + o];
  db[o] = sum;
}

__global__ void relu_backward_kernel(const float* a, float* da, std::size_t count) {
  const std::size_t k = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (k < count && !(a[k] > 0.0f)) da[k] = 0.0f;
}

// One thread per sample (class counts are small).
__global__ void softmax_xent_kernel(const float* logits, const int* labels, float* dlogits,
                                    double* losses, int* correct, std::size_t batch,
                                    std::size_t classes) {
  const std::size_t n = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (n >= batch) return;
  const float* row = logits + n * classes;
  std::size_t argmax = 0;
  for (std::size_t c = 1; c < classes; ++c) {
    if (row[c] > row[argmax]) argmax = c;
  }
  const double peak = row[argmax];
  double denom = 0;
  for (std::size_t c = 0; c < classes; ++c) denom += exp(static_cast<double>(row[c]) - peak);
  const auto label = static_cast<std::size_t>(labels[n]);
  losses[n] = log(denom) - (static_cast<double>(row[label]) - peak);
  correct[n] = argmax == label ? 1 : 0;
  if (dlogits == nullptr) return;
  const double inv_batch = 1.0 / static_cast<double>(batch);
  for (std::size_t c = 0; c < classes; ++c) {
    const double p = exp(static_cast<double>(row[c]) - peak) / denom;
    dlogits[n * classes + c] = static_cast<float>((p - (c == label ? 1.0 : 0.0)) * inv_batch);
  }
}

__global__ void average_kernel(const float* blocks, float* out, std::size_t n, std::size_t ranks) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  float sum = 0;
  for (std::size_t r = 0; r < ranks; ++r) sum += blocks[r * n + i];
  out[i] = sum / static_cast<float>(ranks);
}

__global__ void sgd_kernel(float* p, const float* g, float* m, std::size_t n, StepScalars s) {
  const std::size_t k = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (k >= n) return;
  if (m == nullptr) {
    p[k] -= s.learning_rate * g[k];
    return;
  }
  m[k] = s.first_step ? g[k] : s.momentum * m[k] + g[k];
  p[k] -= s.learning_rate * m[k];
}

__global__ void adam_kernel(float* p, const float* g, float* m, float* v, std::size_t n,
                            StepScalars s) {
  const std::size_t k = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (k >= n) return;
  m[k] = s.beta1 * m[k] + (1.0f - s.beta1) * g[k];
  v[k] = s.beta2 * v[k] + (1.0f - s.beta2) * g[k] * g[k];
  p[k] -= s.learning_rate * m[k] / (sqrtf(v[k]) + s.epsilon);
}

class CudaEngine final : public Engine {
 public:
  CudaEngine(const MlpShape& shape, std::size_t max_batch, int device)
      : shape_(shape), layout_(shape), max_batch_(max_batch) {
    check(cudaSetDevice(device), "cudaSetDevice");
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    check(cublasCreate(&blas_), "cublasCreate");
    check(cublasSetStream(blas_, stream_), "cublasSetStream");
    // Pin the math mode so results do not depend on TF32 defaults.
    check(cublasSetMathMode(blas_, CUBLAS_PEDANTIC_MATH), "cublasSetMathMode");
    params_.resize(layout_.total());
    grads_.resize(layout_.total());
    std::size_t widest = 0;
    for (std::size_t l = 0; l < shape_.layers(); ++l) {
      activations_.emplace_back(
          std::make_unique<DeviceArray<float>>(max_batch * shape_.widths[l + 1]));
      widest = std::max(widest, shape_.widths[l + 1]);
    }
    delta_.resize(max_batch * widest);
    delta_prev_.resize(max_batch * widest);
    inputs_.resize(max_batch * shape_.input_dim());
    labels_.resize(max_batch);
    losses_.resize(max_batch);
    correct_.resize(max_batch);
  }
  ~CudaEngine() override {
    cublasDestroy(blas_);
    cudaStreamDestroy(stream_);
  }

  std::string name() const override { return "cuda"; }
  bool uses_device_memory() const override { return true; }
  const ParamLayout& layout() const override { return layout_; }
  float* params() override { return params_.get(); }
  float* grads() override { return grads_.get(); }

  BatchLoss forward_backward(std::span<const float> inputs, std::span<const std::int32_t> labels,
                             const LayerReadyFn& on_layer_ready) override {
    const std::size_t batch = forward(inputs, labels);
    const std::size_t classes = shape_.classes();
    softmax_xent_kernel<<<blocks_for(batch), kThreads, 0, stream_>>>(
        activations_.back()->get(), labels_.get(), delta_.get(), losses_.get(), correct_.get(),
        batch, classes);
    check(cudaGetLastError(), "softmax kernel");
    const BatchLoss result = collect_loss(batch);
    const float one = 1.0f;
    const float zero = 0.0f;
    for (std::size_t l = shape_.layers(); l-- > 0;) {
      const int in = static_cast<int>(shape_.widths[l]);
      const int out = static_cast<int>(shape_.widths[l + 1]);
      const int n = static_cast<int>(batch);
      const float* x = l == 0 ? inputs_.get() : activations_[l - 1]->get();
      float* dw = grads_.get() + layout_.weight(l).offset;
      check(cublasSgemm(blas_, CUBLAS_OP_N, CUBLAS_OP_T, in, out, n, &one, x, in, delta_.get(), out,
                        &zero, dw, in),
            "cublasSgemm (weight gradient)");
      bias_grad_kernel<<<blocks_for(shape_.widths[l + 1]), kThreads, 0, stream_>>>(
          delta_.get(), grads_.get() + layout_.bias(l).offset, batch, shape_.widths[l + 1]);
      check(cudaGetLastError(), "bias gradient kernel");
      if (on_layer_ready) on_layer_ready(l);
      if (l == 0) break;
      const float* w = params_.get() + layout_.weight(l).offset;
      check(cublasSgemm(blas_, CUBLAS_OP_N, CUBLAS_OP_N, in, n, out, &one, w, in, delta_.get(), out,
                        &zero, delta_prev_.get(), in),
            "cublasSgemm (input gradient)");
      relu_backward_kernel<<<blocks_for(batch * shape_.widths[l]), kThreads, 0, stream_>>>(
          activations_[l - 1]->get(), delta_prev_.get(), batch * shape_.widths[l]);
      check(cudaGetLastError(), "ReLU backward kernel");
      delta_.swap_with(delta_prev_);
    }
    return result;
  }

  BatchLoss evaluate(std::span<const float> inputs, std::span<const std::int32_t> labels) override {
    const std::size_t batch = forward(inputs, labels);
    softmax_xent_kernel<<<blocks_for(batch), kThreads, 0, stream_>>>(
        activations_.back()->get(), labels_.get(), nullptr, losses_.get(), correct_.get(), batch,
        shape_.classes());
    check(cudaGetLastError(), "softmax kernel");
    return collect_loss(batch);
  }

  void enable_optimizer(const OptimizerConfig& config) override {
    config_ = config;
    const std::size_t vectors = state_vector_count(config);
    if (vectors >= 1) first_.resize(layout_.total());
    if (vectors >= 2) second_.resize(layout_.total());
    const std::vector<float> zeros(layout_.total(), 0.0f);
    if (vectors >= 1) copy_from_host(first_.get(), zeros.data(), zeros.size() * sizeof(float));
    if (vectors >= 2) copy_from_host(second_.get(), zeros.data(), zeros.size() * sizeof(float));
    steps_ = 0;
    enabled_ = true;
  }
  bool has_optimizer() const override { return enabled_; }
  void optimizer_step() override {
    require_optimizer();
    ++steps_;
    const StepScalars s = step_scalars(config_, steps_);
    const std::size_t n = layout_.total();
    if (config_.kind == OptimizerKind::kAdam) {
      adam_kernel<<<blocks_for(n), kThreads, 0, stream_>>>(params_.get(), grads_.get(),
                                                           first_.get(), second_.get(), n, s);
    } else {
      sgd_kernel<<<blocks_for(n), kThreads, 0, stream_>>>(
          params_.get(), grads_.get(), state_vector_count(config_) > 0 ? first_.get() : nullptr, n,
          s);
    }
    check(cudaGetLastError(), "optimizer kernel");
  }
  void average_into_grads(const float* blocks, std::size_t ranks) override {
    const std::size_t n = layout_.total();
    average_kernel<<<blocks_for(n), kThreads, 0, stream_>>>(blocks, grads_.get(), n, ranks);
    check(cudaGetLastError(), "average kernel");
  }
  OptimizerState read_optimizer_state() override {
    require_optimizer();
    OptimizerState state;
    state.steps = steps_;
    const std::size_t n = layout_.total();
    const std::size_t vectors = state_vector_count(config_);
    if (vectors >= 1) {
      state.first.resize(n);
      copy_to_host(state.first.data(), first_.get(), n * sizeof(float));
    }
    if (vectors >= 2) {
      state.second.resize(n);
      copy_to_host(state.second.data(), second_.get(), n * sizeof(float));
    }
    return state;
  }
  void write_optimizer_state(const OptimizerState& state) override {
    require_optimizer();
    const std::size_t n = layout_.total();
    const std::size_t vectors = state_vector_count(config_);
    if ((vectors >= 1) != (state.first.size() == n) ||
        (vectors >= 2) != (state.second.size() == n)) {
      throw Error(ErrorKind::kMismatch, "optimizer state does not match the optimizer");
    }
    if (vectors >= 1) copy_from_host(first_.get(), state.first.data(), n * sizeof(float));
    if (vectors >= 2) copy_from_host(second_.get(), state.second.data(), n * sizeof(float));
    steps_ = state.steps;
  }

  void copy_to_host(void* host, const void* engine, std::size_t bytes) override {
    check(cudaMemcpyAsync(host, engine, bytes, cudaMemcpyDeviceToHost, stream_), "cudaMemcpy");
    wait_for_compute();
  }
  void copy_from_host(void* engine, const void* host, std::size_t bytes) override {
    check(cudaMemcpyAsync(engine, host, bytes, cudaMemcpyHostToDevice, stream_), "cudaMemcpy");
    wait_for_compute();
  }
  void* scratch(std::size_t bytes) override {
    scratch_.resize(bytes);
    return scratch_.get();
  }
  void wait_for_compute() override {
    check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  }

 private:
  std::size_t forward(std::span<const float> inputs, std::span<const std::int32_t> labels) {
    const std::size_t batch = labels.size();
    if (batch == 0 || batch > max_batch_ || inputs.size() != batch * shape_.input_dim()) {
      throw Error(ErrorKind::kInternal, "forward called with mismatched buffers");
    }
    copy_from_host(inputs_.get(), inputs.data(), inputs.size_bytes());
    copy_from_host(labels_.get(), labels.data(), labels.size_bytes());
    const float one = 1.0f;
    const float zero = 0.0f;
    const float* x = inputs_.get();
    for (std::size_t l = 0; l < shape_.layers(); ++l) {
      const int in = static_cast<int>(shape_.widths[l]);
      const int out = static_cast<int>(shape_.widths[l + 1]);
      float* z = activations_[l]->get();
      check(cublasSgemm(blas_, CUBLAS_OP_T, CUBLAS_OP_N, out, static_cast<int>(batch), in, &one,
                        params_.get() + layout_.weight(l).offset, in, x, in, &zero, z, out),
            "cublasSgemm (forward)");
      add_bias_kernel<<<blocks_for(batch * shape_.widths[l + 1]), kThreads, 0, stream_>>>(
          z, params_.get() + layout_.bias(l).offset, batch, shape_.widths[l + 1],
          l + 1 < shape_.layers());
      check(cudaGetLastError(), "bias kernel");
      x = z;
    }
    return batch;
  }

  BatchLoss collect_loss(std::size_t batch) {
    std::vector<double> losses(batch);
    std::vector<int> correct(batch);
    copy_to_host(losses.data(), losses_.get(), batch * sizeof(double));
    copy_to_host(correct.data(), correct_.get(), batch * sizeof(int));
    BatchLoss result;
    for (std::size_t n = 0; n < batch; ++n) {
      result.loss_sum += losses[n];
      result.correct += static_cast<std::size_t>(correct[n]);
    }
    return result;
  }

  void require_optimizer() const {
    if (!enabled_) throw Error(ErrorKind::kInternal, "optimizer used on a rank that has none");
  }

  MlpShape shape_;
  ParamLayout layout_;
  std::size_t max_batch_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  DeviceArray<float> params_, grads_, delta_, delta_prev_, inputs_, first_, second_;
  std::vector<std::unique_ptr<DeviceArray<float>>> activations_;
  DeviceArray<int> labels_, correct_;
  DeviceArray<double> losses_;
  DeviceArray<std::byte> scratch_;
  OptimizerConfig config_;
  std::uint64_t steps_ = 0;
  bool enabled_ = false;
};

}  // namespace

int cuda_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the "no driver"/"no device" error
    return 0;
  }
  return count;
}

std::unique_ptr<Engine> make_cuda_engine(const MlpShape& shape, std::size_t max_batch, int device) {
  const int count = cuda_device_count();
  if (count == 0) {
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    throw Error(ErrorKind::kInvalidInput,
                std::string("--device cuda: no CUDA device is visible to this process") +
                    (visible ? " (CUDA_VISIBLE_DEVICES=" + std::string(visible) + ")" : "") +
                    "; run on a GPU node or use --device cpu");
  }
  if (device < 0) check(cudaGetDevice(&device), "cudaGetDevice");
  return std::make_unique<CudaEngine>(shape, max_batch, device % count);
}

}  // namespace dtrain::trainer
