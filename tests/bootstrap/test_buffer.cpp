// SPDX-License-Identifier: Apache-2.0
// BackendBuffer on the host backend: what zero(bytes) clears and what it refuses.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "bootstrap/buffer.hpp"
#include "core/error.hpp"

namespace dtrain::bootstrap {
namespace {

std::vector<unsigned char> contents(const BackendBuffer& buffer) {
  std::vector<unsigned char> bytes(buffer.size());
  buffer.download(0, bytes.data(), bytes.size());
  return bytes;
}

BackendBuffer filled(std::size_t bytes) {
  BackendBuffer buffer(Backend::kMpi, bytes);
  const std::vector<unsigned char> ones(bytes, 0xff);
  buffer.upload(0, ones.data(), ones.size());
  return buffer;
}

TEST(BackendBuffer, ZeroOfAPrefixLeavesTheRestAlone) {
  BackendBuffer buffer = filled(64);
  buffer.zero(24);
  const auto bytes = contents(buffer);
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    EXPECT_EQ(bytes[i], i < 24 ? 0x00 : 0xff) << "byte " << i;
  }
}

TEST(BackendBuffer, ZeroWithoutACountClearsEverything) {
  BackendBuffer buffer = filled(64);
  buffer.zero();
  EXPECT_EQ(contents(buffer), std::vector<unsigned char>(64, 0x00));
}

TEST(BackendBuffer, ZeroBeyondTheEndIsRefusedAndTouchesNothing) {
  BackendBuffer buffer = filled(64);
  EXPECT_THROW(buffer.zero(65), Error);
  EXPECT_EQ(contents(buffer), std::vector<unsigned char>(64, 0xff));
}

}  // namespace
}  // namespace dtrain::bootstrap
