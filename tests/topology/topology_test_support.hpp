// SPDX-License-Identifier: Apache-2.0
#pragma once
// Paths to the topology fixtures and a skip helper for the real captures
// (DTRAIN_SHARED_TOPOLOGIES).

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

namespace dtrain::topology::testing {

inline std::string fixture(const std::string& name) {
  return std::string(DTRAIN_TOPOLOGY_FIXTURES) + "/" + name;
}

inline std::string shared_topology(const std::string& name) {
  return std::string(DTRAIN_SHARED_TOPOLOGIES) + "/" + name;
}

inline bool have_shared_topologies() {
  return std::filesystem::is_directory(DTRAIN_SHARED_TOPOLOGIES);
}

}  // namespace dtrain::topology::testing

// Real topologies are not part of a plain clone; say so instead of failing.
#define SKIP_WITHOUT_SHARED_TOPOLOGIES()                                       \
  do {                                                                         \
    if (!::dtrain::topology::testing::have_shared_topologies()) {              \
      GTEST_SKIP() << "real topologies not found at " DTRAIN_SHARED_TOPOLOGIES \
                      " (configure with -DDTRAIN_SHARED_TOPOLOGIES=DIR)";      \
    }                                                                          \
  } while (false)
