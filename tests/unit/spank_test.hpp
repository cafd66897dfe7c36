// SPDX-License-Identifier: Apache-2.0
#pragma once
// The fixture the tests of the real SPANK callbacks start from: a fresh fake and plugin state,
// and a task end that records its status instead of exiting the test program.

#include <gtest/gtest.h>

#include "spank/state.hpp"
#include "spank_fake.hpp"

namespace dtrain::testing {

class SpankTest : public ::testing::Test {
 protected:
  void SetUp() override {
    reset_fake();
    spank::state() = spank::PluginState{};
    ended_with() = -1;
    spank::state().end_task = [](int status) { ended_with() = status; };
  }

  // The status a task that could not get its variables ended with; -1 while none ended.
  static int& ended_with() {
    static int status = -1;
    return status;
  }
};

}  // namespace dtrain::testing
