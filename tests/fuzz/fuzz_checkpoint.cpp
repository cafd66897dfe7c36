// SPDX-License-Identifier: Apache-2.0
// Fuzzes the trainer's checkpoint reader, trainer::decode_checkpoint, which parses a .dtc
// file read from --checkpoint-dir.
//
// Each input is decoded twice: as the whole file, and as a payload behind a header whose sizes
// and XXH3 checksums are made valid, so that mutations reach the payload parser instead of
// stopping at the checksums. A file the reader accepts must re-encode to the same bytes.

#include <xxhash.h>

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "fuzz_support.hpp"
#include "trainer/checkpoint.hpp"

namespace {

using dtrain::fuzz::require;
using dtrain::trainer::kCheckpointHeaderBytes;

void append(std::vector<std::byte>& out, const void* data, std::size_t size) {
  const auto* p = static_cast<const std::byte*>(data);
  out.insert(out.end(), p, p + size);
}

// The header encode_checkpoint writes (see checkpoint.hpp), around an arbitrary payload.
std::vector<std::byte> with_valid_header(std::span<const std::byte> payload) {
  std::vector<std::byte> file;
  append(file, "DTRAINCK", 8);
  const std::uint32_t version = dtrain::trainer::kCheckpointVersion;
  const auto header_bytes = static_cast<std::uint32_t>(kCheckpointHeaderBytes);
  const std::uint64_t payload_bytes = payload.size();
  const std::uint64_t payload_hash = XXH3_64bits(payload.data(), payload.size());
  append(file, &version, sizeof version);
  append(file, &header_bytes, sizeof header_bytes);
  append(file, &payload_bytes, sizeof payload_bytes);
  append(file, &payload_hash, sizeof payload_hash);
  const std::uint64_t header_hash = XXH3_64bits(file.data(), file.size());
  append(file, &header_hash, sizeof header_hash);
  require(file.size() == kCheckpointHeaderBytes, "header size");
  file.insert(file.end(), payload.begin(), payload.end());
  return file;
}

void decode(std::span<const std::byte> bytes) {
  try {
    const auto state = dtrain::trainer::decode_checkpoint(bytes, "fuzz.dtc");
    const auto again = dtrain::trainer::encode_checkpoint(state);
    require(
        again.size() == bytes.size() && std::memcmp(again.data(), bytes.data(), bytes.size()) == 0,
        "an accepted checkpoint does not re-encode to the same bytes");
    require(dtrain::trainer::identity_mismatch(state.identity, state.identity).empty(),
            "an identity differs from itself");
    (void)dtrain::trainer::identity_mismatch(state.identity, {{"world_size", "4"}});
    (void)dtrain::trainer::parameter_hash(state.params);
  } catch (const dtrain::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> input(reinterpret_cast<const std::byte*>(data), size);
  decode(input);
  // A real checkpoint as the seed keeps its payload here; a raw payload as the seed also works.
  const auto payload =
      size >= kCheckpointHeaderBytes ? input.subspan(kCheckpointHeaderBytes) : input;
  decode(with_valid_header(payload));
  return 0;
}
