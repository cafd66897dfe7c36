// SPDX-License-Identifier: Apache-2.0
// The topology summary that slurmd caches for steps: every fixture survives the round trip
// exactly, and anything else is refused with the file's name.
#include <gtest/gtest.h>

#include <filesystem>

#include "core/error.hpp"
#include "topology/load_io.hpp"
#include "topology/summary.hpp"
#include "topology_test_support.hpp"

namespace {

using namespace dtrain::topology;
using dtrain::topology::testing::fixture;

TEST(TopologySummary, EveryFixtureRoundTripsExactly) {
  int checked = 0;
  for (const auto& entry : std::filesystem::directory_iterator(DTRAIN_TOPOLOGY_FIXTURES)) {
    if (entry.path().extension() != ".xml") continue;
    const NodeTopology loaded = load_topology(entry.path().string());
    const NodeTopology back = from_summary(to_summary(loaded), "test");
    EXPECT_EQ(back, loaded) << entry.path();
    ++checked;
  }
  EXPECT_GE(checked, 5);
  const NodeTopology dgx = load_topology(fixture("dgx-h100.xml"));
  EXPECT_EQ(dgx.gpus.size(), 8u);
  // A few kilobytes where the XML is hundreds.
  EXPECT_LT(to_summary(dgx).size(), 64u * 1024);
}

TEST(TopologySummary, AnotherFormatOrDamageIsRefusedNamingTheFile) {
  std::string text = to_summary(load_topology(fixture("two-cpu-two-gpu.xml")));
  const auto at = text.find("\"dtrain_topology_summary\":1");
  ASSERT_NE(at, std::string::npos) << text.substr(0, 200);
  std::string newer = text;
  newer.replace(at, 27, "\"dtrain_topology_summary\":2");
  try {
    from_summary(newer, "/run/dtrain/topology.summary.json");
    FAIL();
  } catch (const dtrain::Error& e) {
    EXPECT_STREQ(e.what(),
                 "topology summary /run/dtrain/topology.summary.json has format 2, this dtrain "
                 "reads format 1");
  }
  EXPECT_THROW(from_summary(text.substr(0, text.size() / 2), "x"), dtrain::Error);
  EXPECT_THROW(from_summary("{\"dtrain_topology_summary\":1}", "x"), dtrain::Error);
  EXPECT_THROW(from_summary("[]", "x"), dtrain::Error);
}

}  // namespace
