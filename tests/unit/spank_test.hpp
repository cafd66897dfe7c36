// SPDX-License-Identifier: Apache-2.0
#pragma once
// The fixture the tests of the real SPANK callbacks start from: a fresh fake and plugin state,
// and a task end that records its status instead of exiting the test program.

#include <gtest/gtest.h>
#include <slurm/slurm.h>

#include <cstdint>
#include <string>

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

  // task_init of local task `local_id`, whose S_TASK_GLOBAL_ID (the component's task id in a
  // heterogeneous step) is `task_id`.
  static int task(int local_id, std::uint32_t task_id) {
    fake().task_id = local_id;
    fake().items[S_TASK_GLOBAL_ID] = task_id;
    return slurm_spank_task_init(handle(), 0, nullptr);
  }

  // Whether slurm_error logged a message containing `needle`.
  static bool logged(const std::string& needle) {
    for (const auto& e : fake().errors) {
      if (e.find(needle) != std::string::npos) return true;
    }
    return false;
  }
};

}  // namespace dtrain::testing
