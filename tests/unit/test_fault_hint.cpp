// SPDX-License-Identifier: Apache-2.0
// The fault hint (core/fault_hint.hpp): what a job writes is parsed as hostile input, bounded,
// and only ever names a node.

#include <gtest/gtest.h>

#include <string>

#include "core/config.hpp"
#include "core/error.hpp"
#include "core/fault_hint.hpp"

namespace dtrain::core {
namespace {

TEST(FaultHint, FormatsOneLineAndReadsItBack) {
  const FaultHint hint{"node2", "bootstrap preflight: an end of every failed connection"};
  const std::string line = format_fault_hint(hint);
  EXPECT_EQ(line, "suspect node2 bootstrap preflight: an end of every failed connection\n");
  const auto parsed = parse_fault_hints(line);
  ASSERT_EQ(parsed.hints.size(), 1U);
  EXPECT_EQ(parsed.hints[0], hint);
  EXPECT_EQ(parsed.rejected, 0U);
  EXPECT_EQ(format_fault_hint({"node2", ""}), "suspect node2\n");
}

TEST(FaultHint, ControlCharactersInTheDetailBecomeSpacesAndItIsCut) {
  const auto line =
      format_fault_hint({"n1", std::string("a\nb\x1b[31mc\t") + std::string(400, 'x')});
  EXPECT_EQ(line.find('\n'), line.size() - 1);
  EXPECT_EQ(line.find('\x1b'), std::string::npos);
  EXPECT_LE(line.size(), std::string("suspect n1 \n").size() + kMaxFaultHintDetail);
}

TEST(FaultHint, RefusesToFormatANameThatIsNoNodeName) {
  EXPECT_THROW(format_fault_hint({"node2 rm -rf", "x"}), Error);
  EXPECT_THROW(format_fault_hint({"", "x"}), Error);
  EXPECT_THROW(format_fault_hint({"../etc", "x"}), Error);
}

TEST(FaultHint, HostileLinesAreCountedAndDropped) {
  const std::string bytes = std::string("garbage\n") + "suspect node1\n" +
                            "suspect ../../etc/passwd x\n" + "suspect -rf x\n" + "suspect\n" +
                            "suspect node[1-3] ranges are not names\n" + "SUSPECT node1\n" +
                            "suspect " + std::string(600, 'a') + "\n" + "suspect node3 cut off";
  const auto parsed = parse_fault_hints(bytes);
  ASSERT_EQ(parsed.hints.size(), 1U);
  EXPECT_EQ(parsed.hints[0].node, "node1");
  EXPECT_EQ(parsed.rejected, 8U);
}

TEST(FaultHint, DuplicatesCountOnceAndAStepKeepsAtMostTheBound) {
  std::string bytes;
  for (int i = 0; i < 3; ++i) bytes += "suspect node2 same\n";
  for (std::size_t i = 0; i < kMaxFaultHintsPerStep + 2; ++i) {
    bytes += "suspect n" + std::to_string(i) + " x\n";
  }
  const auto parsed = parse_fault_hints(bytes);
  EXPECT_EQ(parsed.hints.size(), kMaxFaultHintsPerStep);
  EXPECT_EQ(parsed.hints[0].node, "node2");
  EXPECT_EQ(parsed.rejected, 3U);
  EXPECT_TRUE(parse_fault_hints("").hints.empty());
  EXPECT_TRUE(parse_fault_hints(std::string(70000, '\0')).hints.empty());
}

TEST(FaultHint, FilesAreNamedPerJobStepAndHost) {
  EXPECT_EQ(fault_hint_file_name(42, 3, "node2"), "42.3.node2");
  EXPECT_TRUE(is_fault_hint_file_of("42.3.node2", 42, "node2"));
  EXPECT_TRUE(is_fault_hint_file_of("42.0.node2", 42, "node2"));
  EXPECT_FALSE(is_fault_hint_file_of("42.3.node20", 42, "node2"));
  EXPECT_FALSE(is_fault_hint_file_of("420.3.node2", 42, "node2"));
  EXPECT_FALSE(is_fault_hint_file_of("42.3.node2.partial.7", 42, "node2"));
  EXPECT_FALSE(is_fault_hint_file_of("42.x.node2", 42, "node2"));
  EXPECT_FALSE(is_fault_hint_file_of("42..node2", 42, "node2"));
  TopologyCache cache;
  EXPECT_EQ(fault_hint_dir(cache), "/run/dtrain/fault-hints");
  cache.dir = "/var/lib/dtrain";
  EXPECT_EQ(fault_hint_dir(cache), "/var/lib/dtrain/fault-hints");
  cache.enabled = false;
  EXPECT_EQ(fault_hint_dir(cache), "/run/dtrain/fault-hints");
}

TEST(FaultHint, NodeNames) {
  EXPECT_TRUE(is_node_name("node2"));
  EXPECT_TRUE(is_node_name("gpu-a100.rack_3"));
  EXPECT_FALSE(is_node_name(std::string(256, 'a')));
  EXPECT_FALSE(is_node_name(".hidden"));
  EXPECT_FALSE(is_node_name("a/b"));
  EXPECT_FALSE(is_node_name("a b"));
}

}  // namespace
}  // namespace dtrain::core
