// SPDX-License-Identifier: Apache-2.0
// The task's side of the fault hint (bootstrap/fault_hint.hpp): one line into the plugin's pipe,
// nothing anywhere else.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <string>

#include "bootstrap/fault_hint.hpp"

namespace dtrain::bootstrap {
namespace {

class FaultHintWriter : public ::testing::Test {
 protected:
  void TearDown() override {
    unsetenv(core::kFaultHintFdVariable);
    unsetenv(core::kFaultHintPipeVariable);
  }

  // The two variables as the plugin sets them for the pipe whose write end is `fd`.
  static void export_pipe(int fd) {
    struct stat st {};
    ASSERT_EQ(fstat(fd, &st), 0);
    setenv(core::kFaultHintFdVariable, std::to_string(fd).c_str(), 1);
    setenv(core::kFaultHintPipeVariable, ("pipe:[" + std::to_string(st.st_ino) + "]").c_str(), 1);
  }
};

std::string drain(int fd) {
  std::array<char, 4096> buffer{};
  const ssize_t n = read(fd, buffer.data(), buffer.size());
  return n > 0 ? std::string(buffer.data(), static_cast<std::size_t>(n)) : std::string();
}

TEST_F(FaultHintWriter, WritesOneLineIntoThePipeTheVariableNames) {
  std::array<int, 2> ends{};
  ASSERT_EQ(pipe2(ends.data(), O_NONBLOCK), 0);
  export_pipe(ends[1]);
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

// The program closed the plugin's pipe and the number went to a pipe of its own: the hint must
// not land in the program's pipe, nor without the pipe's name.
TEST_F(FaultHintWriter, APipeOfTheProgramsOwnAtTheNumberIsLeftAlone) {
  std::array<int, 2> plugin{};
  ASSERT_EQ(pipe2(plugin.data(), O_NONBLOCK), 0);
  export_pipe(plugin[1]);
  const std::string name = std::getenv(core::kFaultHintPipeVariable);
  const int number = plugin[1];
  close(plugin[0]);
  close(plugin[1]);
  std::array<int, 2> own{};
  ASSERT_EQ(pipe2(own.data(), O_NONBLOCK), 0);
  ASSERT_EQ(dup2(own[1], number), number);
  setenv(core::kFaultHintFdVariable, std::to_string(number).c_str(), 1);
  setenv(core::kFaultHintPipeVariable, name.c_str(), 1);
  EXPECT_FALSE(write_fault_hint({"node2", "x"}));
  EXPECT_EQ(drain(own[0]), "");
  export_pipe(number);
  unsetenv(core::kFaultHintPipeVariable);
  EXPECT_FALSE(write_fault_hint({"node2", "x"}));
  close(number);
  close(own[0]);
  close(own[1]);
}

TEST_F(FaultHintWriter, AFullPipeNeitherBlocksNorThrows) {
  std::array<int, 2> ends{};
  ASSERT_EQ(pipe2(ends.data(), O_NONBLOCK), 0);
  const std::string filler(4096, 'x');
  while (write(ends[1], filler.data(), filler.size()) > 0) {
  }
  export_pipe(ends[1]);
  EXPECT_FALSE(write_fault_hint({"node2", "x"}));
  // A name that is no node name is refused, not written.
  EXPECT_FALSE(write_fault_hint({"node2 x", "y"}));
  close(ends[0]);
  close(ends[1]);
}

}  // namespace
}  // namespace dtrain::bootstrap
