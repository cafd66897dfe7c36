// SPDX-License-Identifier: Apache-2.0
#pragma once
// Gradient synchronisation and the small host-side collectives of the training loop.
//
// DDP (SyncMode::kDdp): gradients are grouped into buckets (buckets.hpp); as soon as backward
// completes a bucket it is all-reduced in place with ReduceOp::kAvg through all_reduce_async,
// so the reduction overlaps the backward pass of earlier layers; pending requests are polled
// (test()) after each layer so MPI makes progress; all are waited for before the optimizer.
// Every rank keeps optimizer state and steps.
//
// Naive (SyncMode::kNaive): after the whole backward, one all-reduce of the full gradient
// (no buckets, no overlap); every rank steps. It isolates what DDP's buckets and overlap buy.
//
// DP (SyncMode::kDp), the master-device shape of torch.nn.DataParallel: after the whole
// backward every replica's gradient is gathered to rank 0 (DataParallel's master copies each
// replica's gradients to itself and adds them), rank 0 averages them, alone holds optimizer
// state and steps, then broadcasts the parameters (DataParallel replicates the module from the
// master every step). Rank 0's link carries (size-1) gradients in and out while the others wait.

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "bootstrap/communicator.hpp"
#include "trainer/buckets.hpp"
#include "trainer/engine.hpp"

namespace dtrain::trainer {

enum class SyncMode { kDdp, kNaive, kDp };
const char* sync_name(SyncMode mode);
// Whether `rank` runs the optimizer (and so holds its state): every rank, except under dp.
bool steps_optimizer(SyncMode mode, int rank);

// Collectives over host values, staged through engine memory when the backend needs device
// buffers (NCCL).
class HostChannel {
 public:
  HostChannel(bootstrap::Communicator& comm, Engine& engine);
  int rank() const { return comm_.rank(); }
  int size() const { return comm_.size(); }
  void all_reduce_sum(std::span<double> values);
  std::vector<std::uint64_t> all_gather(std::uint64_t value);
  std::vector<double> all_gather(std::span<const double> values);  // rank-major
  // Broadcasts a byte string of any length from root (the size travels first).
  void broadcast_bytes(std::vector<std::byte>& bytes, int root);
  void broadcast_floats(float* engine_buffer, std::size_t count, int root);
  void barrier();

 private:
  bool staged() const;
  bootstrap::Communicator& comm_;
  Engine& engine_;
};

class GradientSync {
 public:
  GradientSync(SyncMode mode, bootstrap::Communicator& comm, Engine& engine,
               std::size_t bucket_bytes);
  SyncMode mode() const { return mode_; }
  const std::vector<Bucket>& buckets() const { return buckets_; }
  // Whether this rank runs the optimizer.
  bool steps_optimizer() const;

  // Passed to Engine::forward_backward.
  LayerReadyFn layer_ready_hook();
  // After backward: finishes the reduction and updates the parameters on every rank.
  void finish_and_step();

  // Cumulative seconds spent blocked in collectives.
  double communication_seconds() const { return communication_seconds_; }

 private:
  void on_layer_ready(std::size_t layer);
  void launch(std::size_t bucket);
  void finish_ddp();
  void finish_naive();
  void finish_dp();
  // The gradient in host memory when the communicator needs it there (see staged()).
  float* gradients_for_communicator();
  bool staged() const;

  SyncMode mode_;
  bootstrap::Communicator& comm_;
  Engine& engine_;
  std::vector<Bucket> buckets_;
  BucketTracker tracker_;
  std::vector<std::unique_ptr<bootstrap::Request>> in_flight_;
  std::vector<float> host_staging_;   // device engine + host backend only
  std::vector<float> host_gathered_;  // the same, dp on rank 0: every rank's gradient
  double communication_seconds_ = 0;
};

}  // namespace dtrain::trainer
