// SPDX-License-Identifier: Apache-2.0
#pragma once
// Sharding as torch.utils.data.DistributedSampler does it: each epoch the index list is
// permuted with a generator seeded by (seed, epoch); when the set does not divide evenly, the
// list is PADDED by repeating its first indices (drop_last=false, the torch default) or
// TRUNCATED (drop_last=true); rank r then takes every world-th index starting at r. Within a
// shard, batches are consecutive and an incomplete last batch is dropped (DataLoader
// drop_last=true), so every rank runs the same number of steps.
//
// Consequence used by the reference check: the global batch of step s (the union of all
// ranks' batches) is exactly perm[s*B*world, (s+1)*B*world) of the padded list.

#include <cstdint>
#include <span>
#include <vector>

namespace dtrain::trainer {

struct SamplerSpec {
  std::uint64_t dataset_size = 0;
  std::uint64_t world_size = 1;
  std::uint64_t batch_per_rank = 1;
  std::uint64_t seed = 0;
  bool shuffle = true;
  bool drop_last = false;
};

// Throws dtrain::Error when a rank's shard cannot hold a single batch.
void validate(const SamplerSpec& spec);

std::uint64_t shard_size(const SamplerSpec& spec);
std::uint64_t steps_per_epoch(const SamplerSpec& spec);

// The padded/truncated, permuted index list of an epoch (world_size * shard_size entries).
std::vector<std::uint64_t> epoch_order(const SamplerSpec& spec, std::uint64_t epoch);

// Rank r's shard of an epoch.
std::vector<std::uint64_t> rank_shard(const SamplerSpec& spec, std::uint64_t epoch,
                                      std::uint64_t rank);

// The indices of one step for the given ranks, concatenated in rank order. A normal process
// passes its own rank; the single-process reference passes every rank of the emulated world.
// `order` is epoch_order() of the current epoch (computed once per epoch by the caller).
std::vector<std::uint64_t> step_indices(const SamplerSpec& spec,
                                        std::span<const std::uint64_t> order,
                                        std::uint64_t step_in_epoch,
                                        std::span<const std::uint64_t> ranks);

}  // namespace dtrain::trainer
