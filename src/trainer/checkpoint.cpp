// SPDX-License-Identifier: Apache-2.0
#include "trainer/checkpoint.hpp"

#include <xxhash.h>

#include <bit>
#include <cstdio>
#include <cstring>
#include <map>

#include "core/error.hpp"

namespace dtrain::trainer {

static_assert(std::endian::native == std::endian::little,
              "the checkpoint codec writes native little-endian words");

namespace {

constexpr char kMagic[8] = {'D', 'T', 'R', 'A', 'I', 'N', 'C', 'K'};

class Writer {
 public:
  void raw(const void* data, std::size_t size) {
    const auto* p = static_cast<const std::byte*>(data);
    bytes_.insert(bytes_.end(), p, p + size);
  }
  void u32(std::uint32_t v) { raw(&v, sizeof v); }
  void u64(std::uint64_t v) { raw(&v, sizeof v); }
  void text(const std::string& s) {
    u32(static_cast<std::uint32_t>(s.size()));
    raw(s.data(), s.size());
  }
  void floats(const std::vector<float>& v) {
    u64(v.size());
    raw(v.data(), v.size() * sizeof(float));
  }
  std::vector<std::byte>& bytes() { return bytes_; }

 private:
  std::vector<std::byte> bytes_;
};

class Reader {
 public:
  Reader(std::span<const std::byte> bytes, const std::string& source)
      : bytes_(bytes), source_(source) {}
  void raw(void* out, std::size_t size) {
    if (size > bytes_.size() - pos_) fail("payload ends early");
    if (size == 0) return;  // an empty vector's data() may be null, which memcpy forbids
    std::memcpy(out, bytes_.data() + pos_, size);
    pos_ += size;
  }
  std::uint32_t u32() {
    std::uint32_t v = 0;
    raw(&v, sizeof v);
    return v;
  }
  std::uint64_t u64() {
    std::uint64_t v = 0;
    raw(&v, sizeof v);
    return v;
  }
  std::string text() {
    const std::uint32_t size = u32();
    if (size > bytes_.size() - pos_) fail("a string runs past the payload");
    std::string s(reinterpret_cast<const char*>(bytes_.data() + pos_), size);
    pos_ += size;
    return s;
  }
  std::vector<float> floats() {
    const std::uint64_t count = u64();
    if (count > (bytes_.size() - pos_) / sizeof(float)) fail("an array runs past the payload");
    std::vector<float> v(count);
    raw(v.data(), count * sizeof(float));
    return v;
  }
  bool done() const { return pos_ == bytes_.size(); }
  [[noreturn]] void fail(const std::string& what) const {
    throw Error(ErrorKind::kInvalidInput, "checkpoint " + source_ + " is corrupt: " + what);
  }

 private:
  std::span<const std::byte> bytes_;
  std::string source_;
  std::size_t pos_ = 0;
};

}  // namespace

std::vector<std::byte> encode_checkpoint(const TrainState& state) {
  Writer payload;
  payload.u32(static_cast<std::uint32_t>(state.identity.size()));
  for (const auto& [key, value] : state.identity) {
    payload.text(key);
    payload.text(value);
  }
  payload.u64(state.step);
  payload.u64(state.epoch);
  payload.u64(state.step_in_epoch);
  payload.u64(state.seed);
  payload.floats(state.params);
  payload.u64(state.optimizer.steps);
  payload.floats(state.optimizer.first);
  payload.floats(state.optimizer.second);

  Writer file;
  file.raw(kMagic, sizeof kMagic);
  file.u32(kCheckpointVersion);
  file.u32(kCheckpointHeaderBytes);
  file.u64(payload.bytes().size());
  file.u64(XXH3_64bits(payload.bytes().data(), payload.bytes().size()));
  file.u64(XXH3_64bits(file.bytes().data(), file.bytes().size()));
  file.raw(payload.bytes().data(), payload.bytes().size());
  return std::move(file.bytes());
}

TrainState decode_checkpoint(std::span<const std::byte> bytes, const std::string& source) {
  Reader header(bytes.first(std::min(bytes.size(), kCheckpointHeaderBytes)), source);
  if (bytes.size() < kCheckpointHeaderBytes) {
    header.fail("truncated: " + std::to_string(bytes.size()) + " bytes, shorter than the " +
                std::to_string(kCheckpointHeaderBytes) + "-byte header");
  }
  char magic[sizeof kMagic];
  header.raw(magic, sizeof magic);
  if (std::memcmp(magic, kMagic, sizeof kMagic) != 0)
    header.fail("not a dtrain checkpoint (bad magic)");
  const std::uint32_t version = header.u32();
  const std::uint32_t header_bytes = header.u32();
  const std::uint64_t payload_bytes = header.u64();
  const std::uint64_t payload_hash = header.u64();
  const std::uint64_t header_hash = header.u64();
  if (XXH3_64bits(bytes.data(), kCheckpointHeaderBytes - sizeof(std::uint64_t)) != header_hash) {
    header.fail("header checksum mismatch");
  }
  if (version != kCheckpointVersion || header_bytes != kCheckpointHeaderBytes) {
    header.fail("format version " + std::to_string(version) +
                " is not supported (this build reads " + std::to_string(kCheckpointVersion) + ")");
  }
  const std::uint64_t available = bytes.size() - kCheckpointHeaderBytes;
  if (available != payload_bytes) {
    header.fail(std::string(available < payload_bytes ? "truncated" : "trailing bytes") +
                ": header announces " + std::to_string(payload_bytes) +
                " payload bytes, file has " + std::to_string(available));
  }
  const std::span<const std::byte> body = bytes.subspan(kCheckpointHeaderBytes);
  if (XXH3_64bits(body.data(), body.size()) != payload_hash) {
    header.fail("payload checksum mismatch (expected " + hex64(payload_hash) + ")");
  }

  Reader in(body, source);
  TrainState state;
  const std::uint32_t pairs = in.u32();
  for (std::uint32_t i = 0; i < pairs; ++i) {
    std::string key = in.text();
    state.identity.emplace_back(std::move(key), in.text());
  }
  state.step = in.u64();
  state.epoch = in.u64();
  state.step_in_epoch = in.u64();
  state.seed = in.u64();
  state.params = in.floats();
  state.optimizer.steps = in.u64();
  state.optimizer.first = in.floats();
  state.optimizer.second = in.floats();
  if (!in.done()) in.fail("unexpected bytes after the optimizer state");
  return state;
}

std::string identity_mismatch(const RunIdentity& saved, const RunIdentity& current) {
  std::map<std::string, std::pair<std::string, std::string>> merged;
  for (const auto& [key, value] : saved) merged[key].first = value;
  for (const auto& [key, value] : current) merged[key].second = value;
  std::string out;
  for (const auto& [key, values] : merged) {
    if (values.first == values.second) continue;
    out += (out.empty() ? "" : "; ") + key + ": checkpoint " +
           (values.first.empty() ? "(absent)" : values.first) + ", this run " +
           (values.second.empty() ? "(absent)" : values.second);
  }
  return out;
}

std::uint64_t parameter_hash(std::span<const float> params) {
  return XXH3_64bits(params.data(), params.size_bytes());
}

std::string hex64(std::uint64_t value) {
  char text[19];
  std::snprintf(text, sizeof text, "0x%016llx", static_cast<unsigned long long>(value));
  return text;
}

}  // namespace dtrain::trainer
