// SPDX-License-Identifier: Apache-2.0
#pragma once
// Counter-based randomness: every random number is a pure function of (seed, stream, counters),
// so any rank can regenerate any sample or parameter without sharing generator state, and the
// only "RNG state" a checkpoint needs is the seed plus the step/epoch counters.

#include <cmath>
#include <cstdint>

namespace dtrain::trainer {

// Independent streams derived from one user seed.
enum class RngStream : std::uint64_t {
  kTeacher = 1,
  kSampleInput = 2,
  kParameterInit = 3,
  kShuffle = 4,
};

constexpr std::uint64_t mix64(std::uint64_t x) {
  // splitmix64 finalizer: a bijection with good avalanche.
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

constexpr std::uint64_t random_bits(std::uint64_t seed, RngStream stream, std::uint64_t a,
                                    std::uint64_t b = 0) {
  return mix64(mix64(mix64(seed ^ (static_cast<std::uint64_t>(stream) << 56)) + a) + b);
}

// Uniform in [0, 1) with 53 bits.
inline double to_unit(std::uint64_t bits) {
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

// Standard normal by Box-Muller from two counter draws.
inline double standard_normal(std::uint64_t seed, RngStream stream, std::uint64_t a,
                              std::uint64_t b) {
  const double u1 = 1.0 - to_unit(random_bits(seed, stream, a, 2 * b));  // (0, 1]
  const double u2 = to_unit(random_bits(seed, stream, a, 2 * b + 1));
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * 3.14159265358979323846 * u2);
}

// Sequential generator for shuffles, seeded from the counter scheme.
class SplitMix64 {
 public:
  explicit SplitMix64(std::uint64_t state) : state_(state) {}
  std::uint64_t next() {
    state_ += 0x9e3779b97f4a7c15ULL;
    std::uint64_t z = state_;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, bound) by multiply-shift; the bias is below 2^-40 for any bound we use.
  std::uint64_t below(std::uint64_t bound) {
    __extension__ using Wide = unsigned __int128;
    return static_cast<std::uint64_t>((static_cast<Wide>(next()) * bound) >> 64);
  }

 private:
  std::uint64_t state_;
};

}  // namespace dtrain::trainer
