// SPDX-License-Identifier: Apache-2.0
#pragma once
// DDP-style gradient bucketing (torch's compute_bucket_assignment_by_size): tensors are taken
// in REVERSE registration order, since backward produces the last layer's gradients first; a
// tensor is never split; a bucket is closed as soon as it holds at least `cap_bytes`, so a
// bucket exceeds the cap by at most its last tensor. (torch additionally caps the first
// bucket at 1 MiB; dtrain uses one cap for all, set by --bucket-mb.)

#include <cstddef>
#include <vector>

#include "trainer/model.hpp"

namespace dtrain::trainer {

struct Bucket {
  std::vector<std::size_t> tensors;  // in the order backward completes them
  std::size_t offset = 0;            // the bucket's contiguous range in the flat buffer
  std::size_t count = 0;             // floats
};

// `tensors` in registration order, laid out contiguously in that order.
std::vector<Bucket> assign_buckets(const std::vector<TensorRange>& tensors, std::size_t cap_bytes);

// Tracks which tensors of a step are ready and yields buckets to launch. Buckets are released
// strictly in index order, so every rank issues its collectives in the same sequence even if a
// later bucket happens to complete first.
class BucketTracker {
 public:
  BucketTracker(const std::vector<Bucket>& buckets, std::size_t tensor_count);
  void reset();
  // Marks a tensor ready; returns the buckets (indices) that may now be launched, in order.
  std::vector<std::size_t> mark_ready(std::size_t tensor);
  bool all_launched() const { return next_to_launch_ == pending_.size(); }

 private:
  std::vector<std::size_t> bucket_of_tensor_;
  std::vector<std::size_t> tensors_per_bucket_;
  std::vector<std::size_t> pending_;
  std::vector<bool> tensor_ready_;
  std::size_t next_to_launch_ = 0;
};

}  // namespace dtrain::trainer
