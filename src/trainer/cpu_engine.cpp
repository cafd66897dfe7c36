// SPDX-License-Identifier: Apache-2.0
#include <cstring>
#include <vector>

#include "core/error.hpp"
#include "trainer/engine.hpp"

namespace dtrain::trainer {
namespace {

class CpuEngine final : public Engine {
 public:
  CpuEngine(const MlpShape& shape, std::size_t max_batch)
      : model_(shape, max_batch),
        params_(model_.layout().total()),
        grads_(model_.layout().total()) {}

  std::string name() const override { return "cpu"; }
  bool uses_device_memory() const override { return false; }
  const ParamLayout& layout() const override { return model_.layout(); }
  float* params() override { return params_.data(); }
  float* grads() override { return grads_.data(); }

  BatchLoss forward_backward(std::span<const float> inputs, std::span<const std::int32_t> labels,
                             const LayerReadyFn& on_layer_ready) override {
    return model_.forward_backward(params_, grads_, inputs, labels, on_layer_ready);
  }
  BatchLoss evaluate(std::span<const float> inputs, std::span<const std::int32_t> labels) override {
    return model_.evaluate(params_, inputs, labels);
  }

  void enable_optimizer(const OptimizerConfig& config) override {
    config_ = config;
    state_ = make_optimizer_state(config, params_.size());
    enabled_ = true;
  }
  bool has_optimizer() const override { return enabled_; }
  void optimizer_step() override {
    require_optimizer();
    trainer::optimizer_step(config_, state_, params_, grads_);
  }
  void average_into_grads(const float* blocks, std::size_t ranks) override {
    const std::size_t n = grads_.size();
    for (std::size_t i = 0; i < n; ++i) {
      float sum = 0;
      for (std::size_t r = 0; r < ranks; ++r) sum += blocks[r * n + i];
      grads_[i] = sum / static_cast<float>(ranks);
    }
  }
  OptimizerState read_optimizer_state() override {
    require_optimizer();
    return state_;
  }
  void write_optimizer_state(const OptimizerState& state) override {
    require_optimizer();
    const std::size_t vectors = state_vector_count(config_);
    if ((vectors >= 1) != !state.first.empty() || (vectors >= 2) != !state.second.empty() ||
        (!state.first.empty() && state.first.size() != params_.size()) ||
        (!state.second.empty() && state.second.size() != params_.size())) {
      throw Error(ErrorKind::kMismatch, "optimizer state does not match the optimizer");
    }
    state_ = state;
  }

  void copy_to_host(void* host, const void* engine, std::size_t bytes) override {
    if (host != engine) std::memcpy(host, engine, bytes);
  }
  void copy_from_host(void* engine, const void* host, std::size_t bytes) override {
    if (host != engine) std::memcpy(engine, host, bytes);
  }
  void* scratch(std::size_t bytes) override {
    scratch_.resize(bytes);
    return scratch_.data();
  }
  void wait_for_compute() override {}

 private:
  void require_optimizer() const {
    if (!enabled_) throw Error(ErrorKind::kInternal, "optimizer used on a rank that has none");
  }

  CpuMlp model_;
  std::vector<float> params_;
  std::vector<float> grads_;
  OptimizerConfig config_;
  OptimizerState state_;
  bool enabled_ = false;
  std::vector<std::byte> scratch_;
};

}  // namespace

std::unique_ptr<Engine> make_cpu_engine(const MlpShape& shape, std::size_t max_batch) {
  return std::make_unique<CpuEngine>(shape, max_batch);
}

}  // namespace dtrain::trainer
