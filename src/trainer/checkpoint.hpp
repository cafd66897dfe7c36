// SPDX-License-Identifier: Apache-2.0
#pragma once
// The checkpoint file format (.dtc), pure encode/decode. Little-endian:
//
//   header (40 bytes): magic "DTRAINCK" | u32 version | u32 header bytes (40)
//                      | u64 payload bytes | u64 XXH3-64 of payload | u64 XXH3-64 of the 32 bytes
//                      before
//   payload: identity (key=value pairs that must match to resume), step, epoch, step in epoch,
//            seed, parameters, optimizer state.
//
// A file that is short, long, has a wrong magic/version, or whose hashes do not match is refused
// with a message naming the file and what is wrong.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "trainer/optimizer.hpp"

namespace dtrain::trainer {

inline constexpr std::uint32_t kCheckpointVersion = 1;
inline constexpr std::size_t kCheckpointHeaderBytes = 40;

using RunIdentity = std::vector<std::pair<std::string, std::string>>;

struct TrainState {
  RunIdentity identity;
  std::uint64_t step = 0;  // optimizer steps completed
  std::uint64_t epoch = 0;
  std::uint64_t step_in_epoch = 0;  // next step to run within `epoch`
  std::uint64_t seed = 0;           // with the counters above, the complete RNG state
  std::vector<float> params;
  OptimizerState optimizer;
};

std::vector<std::byte> encode_checkpoint(const TrainState& state);

// `source` names the file in error messages.
TrainState decode_checkpoint(std::span<const std::byte> bytes, const std::string& source);

// Empty when they match; otherwise one line per differing key ("world_size: checkpoint 4, this
// run 2").
std::string identity_mismatch(const RunIdentity& saved, const RunIdentity& current);

// XXH3-64 over the raw float bytes, as printed by "parameter hash agreed".
std::uint64_t parameter_hash(std::span<const float> params);

std::string hex64(std::uint64_t value);

}  // namespace dtrain::trainer
