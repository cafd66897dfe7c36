// SPDX-License-Identifier: Apache-2.0
// The task's side of the fault hint (bootstrap/fault_hint.hpp): one line into the plugin's pipe,
// nothing anywhere else.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <string>

#include "bootstrap/fault_hint.hpp"

namespace dtrain::bootstrap {
namespace {

class FaultHintWriter : public ::testing::Test {
 protected:
  void TearDown() override { unsetenv(core::kFaultHintFdVariable); }
};

std::string drain(int fd) {
  std::array<char, 4096> buffer{};
  const ssize_t n = read(fd, buffer.data(), buffer.size());
  return n > 0 ? std::string(buffer.data(), static_cast<std::size_t>(n)) : std::string();
}

TEST_F(FaultHintWriter, WritesOneLineIntoThePipeTheVariableNames) {
  std::array<int, 2> ends{};
  ASSERT_EQ(pipe2(ends.data(), O_NONBLOCK), 0);
  setenv(core::kFaultHintFdVariable, std::to_string(ends[1]).c_str(), 1);
  EXPECT_TRUE(write_fault_hint({"node2", "bootstrap preflight"}));
  EXPECT_EQ(drain(ends[0]), "suspect node2 bootstrap preflight\n");
  close(ends[0]);
  close(ends[1]);
}

TEST_F(FaultHintWriter, WritesNothingWithoutAPipe) {
  EXPECT_FALSE(write_fault_hint({"node2", "x"}));  // no variable
  for (const char* value : {"", "abc", "1x", "-1", "2", "999999"}) {
    setenv(core::kFaultHintFdVariable, value, 1);
    EXPECT_FALSE(write_fault_hint({"node2", "x"})) << value;
  }
  // A number that names a regular file of the program's own is left alone.
  char path[] = "/tmp/dtrain-hint-XXXXXX";
  const int file = mkstemp(path);
  ASSERT_GE(file, 0);
  unlink(path);
  setenv(core::kFaultHintFdVariable, std::to_string(file).c_str(), 1);
  EXPECT_FALSE(write_fault_hint({"node2", "x"}));
  EXPECT_EQ(lseek(file, 0, SEEK_END), 0);
  close(file);
}

TEST_F(FaultHintWriter, AFullPipeNeitherBlocksNorThrows) {
  std::array<int, 2> ends{};
  ASSERT_EQ(pipe2(ends.data(), O_NONBLOCK), 0);
  const std::string filler(4096, 'x');
  while (write(ends[1], filler.data(), filler.size()) > 0) {
  }
  setenv(core::kFaultHintFdVariable, std::to_string(ends[1]).c_str(), 1);
  EXPECT_FALSE(write_fault_hint({"node2", "x"}));
  // A name that is no node name is refused, not written.
  EXPECT_FALSE(write_fault_hint({"node2 x", "y"}));
  close(ends[0]);
  close(ends[1]);
}

}  // namespace
}  // namespace dtrain::bootstrap
