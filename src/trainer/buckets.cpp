// SPDX-License-Identifier: Apache-2.0
#include "trainer/buckets.hpp"

#include <algorithm>
#include <string>

#include "core/error.hpp"

namespace dtrain::trainer {

std::vector<Bucket> assign_buckets(const std::vector<TensorRange>& tensors, std::size_t cap_bytes) {
  if (cap_bytes == 0) throw_invalid("the bucket size must be larger than 0 bytes");
  std::vector<Bucket> buckets;
  Bucket current;
  std::size_t current_bytes = 0;
  for (std::size_t t = tensors.size(); t-- > 0;) {
    const TensorRange& range = tensors[t];
    if (current.tensors.empty()) {
      current.offset = range.offset;
    } else if (range.offset + range.count != current.offset) {
      throw Error(ErrorKind::kInternal, "tensors are not laid out contiguously");
    }
    current.tensors.push_back(t);
    current.offset = range.offset;
    current.count += range.count;
    current_bytes += range.count * sizeof(float);
    if (current_bytes >= cap_bytes) {
      buckets.push_back(std::move(current));
      current = Bucket{};
      current_bytes = 0;
    }
  }
  if (!current.tensors.empty()) buckets.push_back(std::move(current));
  return buckets;
}

BucketTracker::BucketTracker(const std::vector<Bucket>& buckets, std::size_t tensor_count)
    : bucket_of_tensor_(tensor_count, buckets.size()), tensor_ready_(tensor_count, false) {
  for (std::size_t b = 0; b < buckets.size(); ++b) {
    tensors_per_bucket_.push_back(buckets[b].tensors.size());
    for (std::size_t t : buckets[b].tensors) {
      if (t >= tensor_count || bucket_of_tensor_[t] != buckets.size()) {
        throw Error(ErrorKind::kInternal,
                    "tensor " + std::to_string(t) + " is missing from or repeated in the buckets");
      }
      bucket_of_tensor_[t] = b;
    }
  }
  if (std::find(bucket_of_tensor_.begin(), bucket_of_tensor_.end(), buckets.size()) !=
      bucket_of_tensor_.end()) {
    throw Error(ErrorKind::kInternal, "a tensor belongs to no bucket");
  }
  reset();
}

void BucketTracker::reset() {
  pending_ = tensors_per_bucket_;
  std::fill(tensor_ready_.begin(), tensor_ready_.end(), false);
  next_to_launch_ = 0;
}

std::vector<std::size_t> BucketTracker::mark_ready(std::size_t tensor) {
  if (tensor >= tensor_ready_.size() || tensor_ready_[tensor]) {
    throw Error(ErrorKind::kInternal,
                "gradient of tensor " + std::to_string(tensor) + " marked ready twice");
  }
  tensor_ready_[tensor] = true;
  --pending_[bucket_of_tensor_[tensor]];
  std::vector<std::size_t> launch;
  while (next_to_launch_ < pending_.size() && pending_[next_to_launch_] == 0) {
    launch.push_back(next_to_launch_++);
  }
  return launch;
}

}  // namespace dtrain::trainer
