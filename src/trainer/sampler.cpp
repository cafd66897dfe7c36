// SPDX-License-Identifier: Apache-2.0
#include "trainer/sampler.hpp"

#include <numeric>
#include <string>

#include "core/error.hpp"
#include "trainer/rng.hpp"

namespace dtrain::trainer {

void validate(const SamplerSpec& spec) {
  if (spec.world_size == 0 || spec.batch_per_rank == 0 || spec.dataset_size == 0) {
    throw_invalid("data set size, world size and batch size must all be at least 1");
  }
  if (steps_per_epoch(spec) == 0) {
    throw_invalid("each of the " + std::to_string(spec.world_size) + " ranks gets " +
                  std::to_string(shard_size(spec)) + " of the " +
                  std::to_string(spec.dataset_size) + " samples, fewer than one batch of " +
                  std::to_string(spec.batch_per_rank) + "; raise --samples or lower --batch-size");
  }
}

std::uint64_t shard_size(const SamplerSpec& spec) {
  if (spec.drop_last) return spec.dataset_size / spec.world_size;
  return (spec.dataset_size + spec.world_size - 1) / spec.world_size;
}

std::uint64_t steps_per_epoch(const SamplerSpec& spec) {
  return shard_size(spec) / spec.batch_per_rank;
}

std::vector<std::uint64_t> epoch_order(const SamplerSpec& spec, std::uint64_t epoch) {
  std::vector<std::uint64_t> order(spec.dataset_size);
  std::iota(order.begin(), order.end(), std::uint64_t{0});
  if (spec.shuffle) {
    SplitMix64 rng(random_bits(spec.seed, RngStream::kShuffle, epoch));
    for (std::uint64_t i = order.size() - 1; i > 0; --i) {
      std::swap(order[i], order[rng.below(i + 1)]);
    }
  }
  const std::uint64_t total = shard_size(spec) * spec.world_size;
  if (total <= order.size()) {
    order.resize(total);
  } else {
    // Padding may exceed the set itself when world_size > dataset_size; repeat as torch does.
    const std::size_t original = order.size();
    while (order.size() < total) order.push_back(order[order.size() % original]);
  }
  return order;
}

std::vector<std::uint64_t> rank_shard(const SamplerSpec& spec, std::uint64_t epoch,
                                      std::uint64_t rank) {
  const std::vector<std::uint64_t> order = epoch_order(spec, epoch);
  std::vector<std::uint64_t> shard;
  shard.reserve(shard_size(spec));
  for (std::uint64_t i = rank; i < order.size(); i += spec.world_size) shard.push_back(order[i]);
  return shard;
}

std::vector<std::uint64_t> step_indices(const SamplerSpec& spec,
                                        std::span<const std::uint64_t> order,
                                        std::uint64_t step_in_epoch,
                                        std::span<const std::uint64_t> ranks) {
  if (step_in_epoch >= steps_per_epoch(spec)) {
    throw Error(ErrorKind::kInternal,
                "step " + std::to_string(step_in_epoch) + " is past the end of the epoch");
  }
  if (order.size() != shard_size(spec) * spec.world_size) {
    throw Error(ErrorKind::kInternal, "epoch order does not match the sampler");
  }
  std::vector<std::uint64_t> indices;
  indices.reserve(ranks.size() * spec.batch_per_rank);
  for (std::uint64_t rank : ranks) {
    if (rank >= spec.world_size) {
      throw Error(ErrorKind::kInternal, "rank " + std::to_string(rank) + " outside the world");
    }
    for (std::uint64_t j = 0; j < spec.batch_per_rank; ++j) {
      const std::uint64_t position_in_shard = step_in_epoch * spec.batch_per_rank + j;
      indices.push_back(order[position_in_shard * spec.world_size + rank]);
    }
  }
  return indices;
}

}  // namespace dtrain::trainer
