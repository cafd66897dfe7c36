// SPDX-License-Identifier: Apache-2.0
#include "trainer/sync.hpp"

#include <chrono>
#include <cstring>

#include "core/error.hpp"

namespace dtrain::trainer {
namespace {

using bootstrap::Backend;
using bootstrap::DataType;
using bootstrap::ReduceOp;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

const char* sync_name(SyncMode mode) {
  switch (mode) {
    case SyncMode::kDdp:
      return "ddp";
    case SyncMode::kNaive:
      return "naive";
    case SyncMode::kDp:
      return "dp";
  }
  return "unknown";
}

bool steps_optimizer(SyncMode mode, int rank) {
  return mode != SyncMode::kDp || rank == 0;
}

HostChannel::HostChannel(bootstrap::Communicator& comm, Engine& engine)
    : comm_(comm), engine_(engine) {}

bool HostChannel::staged() const {
  return comm_.backend() == Backend::kNccl;
}

void HostChannel::all_reduce_sum(std::span<double> values) {
  const std::size_t bytes = values.size_bytes();
  if (!staged()) {
    comm_.all_reduce(values.data(), values.data(), values.size(), DataType::kFloat64,
                     ReduceOp::kSum);
    return;
  }
  void* device = engine_.scratch(bytes);
  engine_.copy_from_host(device, values.data(), bytes);
  comm_.all_reduce(device, device, values.size(), DataType::kFloat64, ReduceOp::kSum);
  comm_.synchronize();
  engine_.copy_to_host(values.data(), device, bytes);
}

std::vector<double> HostChannel::all_gather(std::span<const double> values) {
  std::vector<double> out(values.size() * static_cast<std::size_t>(comm_.size()));
  if (!staged()) {
    comm_.all_gather(values.data(), out.data(), values.size(), DataType::kFloat64);
    return out;
  }
  auto* device =
      static_cast<std::byte*>(engine_.scratch(values.size_bytes() + out.size() * sizeof(double)));
  engine_.copy_from_host(device, values.data(), values.size_bytes());
  comm_.all_gather(device, device + values.size_bytes(), values.size(), DataType::kFloat64);
  comm_.synchronize();
  engine_.copy_to_host(out.data(), device + values.size_bytes(), out.size() * sizeof(double));
  return out;
}

std::vector<std::uint64_t> HostChannel::all_gather(std::uint64_t value) {
  // There is no 64-bit integer DataType; two int32 words move the bits unchanged.
  std::int32_t words[2];
  std::memcpy(words, &value, sizeof value);
  std::vector<std::int32_t> gathered(2 * static_cast<std::size_t>(comm_.size()));
  if (!staged()) {
    comm_.all_gather(words, gathered.data(), 2, DataType::kInt32);
  } else {
    auto* device = static_cast<std::byte*>(engine_.scratch(sizeof words + gathered.size() * 4));
    engine_.copy_from_host(device, words, sizeof words);
    comm_.all_gather(device, device + sizeof words, 2, DataType::kInt32);
    comm_.synchronize();
    engine_.copy_to_host(gathered.data(), device + sizeof words, gathered.size() * 4);
  }
  std::vector<std::uint64_t> out(static_cast<std::size_t>(comm_.size()));
  std::memcpy(out.data(), gathered.data(), out.size() * sizeof(std::uint64_t));
  return out;
}

void HostChannel::broadcast_bytes(std::vector<std::byte>& bytes, int root) {
  std::int32_t size_words[2];
  const std::uint64_t size = bytes.size();
  std::memcpy(size_words, &size, sizeof size);
  const std::size_t padded_words = [&] {
    if (staged()) {
      auto* device = engine_.scratch(sizeof size_words);
      engine_.copy_from_host(device, size_words, sizeof size_words);
      comm_.broadcast(device, device, 2, DataType::kInt32, root);
      comm_.synchronize();
      engine_.copy_to_host(size_words, device, sizeof size_words);
    } else {
      comm_.broadcast(size_words, size_words, 2, DataType::kInt32, root);
    }
    std::uint64_t received = 0;
    std::memcpy(&received, size_words, sizeof received);
    bytes.resize(received);
    return (received + 3) / 4;
  }();
  if (padded_words == 0) return;
  std::vector<std::int32_t> words(padded_words, 0);
  std::memcpy(words.data(), bytes.data(), bytes.size());
  if (staged()) {
    auto* device = engine_.scratch(words.size() * 4);
    engine_.copy_from_host(device, words.data(), words.size() * 4);
    comm_.broadcast(device, device, words.size(), DataType::kInt32, root);
    comm_.synchronize();
    engine_.copy_to_host(words.data(), device, words.size() * 4);
  } else {
    comm_.broadcast(words.data(), words.data(), words.size(), DataType::kInt32, root);
  }
  std::memcpy(bytes.data(), words.data(), bytes.size());
}

void HostChannel::broadcast_floats(float* engine_buffer, std::size_t count, int root) {
  if (engine_.uses_device_memory() && comm_.backend() == Backend::kMpi) {
    std::vector<float> host(count);
    engine_.copy_to_host(host.data(), engine_buffer, count * sizeof(float));
    comm_.broadcast(host.data(), host.data(), count, DataType::kFloat32, root);
    engine_.copy_from_host(engine_buffer, host.data(), count * sizeof(float));
    return;
  }
  engine_.wait_for_compute();
  comm_.broadcast(engine_buffer, engine_buffer, count, DataType::kFloat32, root);
  comm_.synchronize();
}

void HostChannel::barrier() {
  comm_.barrier();
}

GradientSync::GradientSync(SyncMode mode, bootstrap::Communicator& comm, Engine& engine,
                           std::size_t bucket_bytes)
    : mode_(mode),
      comm_(comm),
      engine_(engine),
      buckets_(assign_buckets(engine.layout().tensors(), bucket_bytes)),
      tracker_(buckets_, engine.layout().tensors().size()) {
  if (staged()) host_staging_.resize(engine.layout().total());
  if (steps_optimizer() != engine.has_optimizer()) {
    throw Error(ErrorKind::kInternal, "optimizer state allocated on the wrong ranks");
  }
}

bool GradientSync::steps_optimizer() const {
  return trainer::steps_optimizer(mode_, comm_.rank());
}

bool GradientSync::staged() const {
  return engine_.uses_device_memory() && comm_.backend() == Backend::kMpi;
}

LayerReadyFn GradientSync::layer_ready_hook() {
  if (mode_ != SyncMode::kDdp) return {};
  tracker_.reset();
  return [this](std::size_t layer) { on_layer_ready(layer); };
}

void GradientSync::on_layer_ready(std::size_t layer) {
  const auto start = Clock::now();
  // Within a layer the bias comes after the weight in registration order, so it is "later".
  for (std::size_t tensor : {2 * layer + 1, 2 * layer}) {
    for (std::size_t bucket : tracker_.mark_ready(tensor)) launch(bucket);
  }
  for (auto& request : in_flight_) request->test();
  communication_seconds_ += seconds_since(start);
}

void GradientSync::launch(std::size_t bucket) {
  const Bucket& b = buckets_[bucket];
  float* grads = engine_.grads() + b.offset;
  engine_.wait_for_compute();
  if (staged()) {
    float* host = host_staging_.data() + b.offset;
    engine_.copy_to_host(host, grads, b.count * sizeof(float));
    grads = host;
  }
  in_flight_.push_back(
      comm_.all_reduce_async(grads, grads, b.count, DataType::kFloat32, ReduceOp::kAvg));
}

void GradientSync::finish_and_step() {
  switch (mode_) {
    case SyncMode::kDdp:
      finish_ddp();
      return;
    case SyncMode::kNaive:
      finish_naive();
      return;
    case SyncMode::kDp:
      finish_dp();
      return;
  }
}

void GradientSync::finish_ddp() {
  const auto start = Clock::now();
  if (!tracker_.all_launched()) {
    throw Error(ErrorKind::kInternal, "backward finished with gradient buckets never launched");
  }
  for (auto& request : in_flight_) request->wait();
  in_flight_.clear();
  comm_.synchronize();
  if (staged()) {
    engine_.copy_from_host(engine_.grads(), host_staging_.data(),
                           host_staging_.size() * sizeof(float));
  }
  communication_seconds_ += seconds_since(start);
  engine_.optimizer_step();
}

float* GradientSync::gradients_for_communicator() {
  const std::size_t count = engine_.layout().total();
  if (!staged()) {
    engine_.wait_for_compute();
    return engine_.grads();
  }
  engine_.copy_to_host(host_staging_.data(), engine_.grads(), count * sizeof(float));
  return host_staging_.data();
}

void GradientSync::finish_naive() {
  const std::size_t count = engine_.layout().total();
  const auto start = Clock::now();
  float* grads = gradients_for_communicator();
  comm_.all_reduce(grads, grads, count, DataType::kFloat32, ReduceOp::kAvg);
  comm_.synchronize();
  if (staged()) engine_.copy_from_host(engine_.grads(), grads, count * sizeof(float));
  communication_seconds_ += seconds_since(start);
  engine_.optimizer_step();
}

void GradientSync::finish_dp() {
  const bool root = comm_.rank() == 0;
  const std::size_t count = engine_.layout().total();
  const auto ranks = static_cast<std::size_t>(comm_.size());
  auto start = Clock::now();
  const float* grads = gradients_for_communicator();
  float* gathered = nullptr;
  if (root && staged()) {
    host_gathered_.resize(ranks * count);
    gathered = host_gathered_.data();
  } else if (root) {
    gathered = static_cast<float*>(engine_.scratch(ranks * count * sizeof(float)));
  }
  comm_.gather(grads, gathered, count, DataType::kFloat32, 0);
  comm_.synchronize();
  communication_seconds_ += seconds_since(start);
  if (root) {
    if (staged()) {
      void* device = engine_.scratch(ranks * count * sizeof(float));
      engine_.copy_from_host(device, gathered, ranks * count * sizeof(float));
      gathered = static_cast<float*>(device);
    }
    engine_.average_into_grads(gathered, ranks);
    engine_.optimizer_step();
  }
  start = Clock::now();
  HostChannel(comm_, engine_).broadcast_floats(engine_.params(), count, 0);
  communication_seconds_ += seconds_since(start);
}

}  // namespace dtrain::trainer
