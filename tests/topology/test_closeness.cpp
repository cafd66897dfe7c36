// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include "topology/closeness.hpp"

namespace dtrain::topology {
namespace {

IoHop bridge(std::uint64_t id) {
  return {IoHop::Kind::kPciBridge, id};
}
IoHop host(std::uint64_t id) {
  return {IoHop::Kind::kHostBridge, id};
}

Placement at(std::vector<IoHop> path, std::uint64_t locality, std::vector<unsigned> numa,
             int package = 0) {
  Placement p;
  p.io_path = std::move(path);
  p.locality.id = locality;
  p.locality.numa_nodes = std::move(numa);
  p.locality.package = package;
  return p;
}

// Switch upstream port 20 with downstream ports 10 and 11, under root port 30 of host bridge 40.
TEST(Closeness, SameSwitchIsPix) {
  const auto gpu = at({bridge(10), bridge(20), bridge(30), host(40)}, 1, {0});
  const auto nic = at({bridge(11), bridge(20), bridge(30), host(40)}, 1, {0});
  EXPECT_EQ(classify(gpu, nic), Closeness::kPix);
  EXPECT_EQ(classify(nic, gpu), Closeness::kPix);
}

TEST(Closeness, FunctionsOfOneSlotArePix) {
  const auto a = at({bridge(10), host(40)}, 1, {0});
  EXPECT_EQ(classify(a, a), Closeness::kPix);
}

TEST(Closeness, SecondSwitchOnTheWayIsPxb) {
  // The GPU sits behind a switch (12 over 14) that hangs from a port (13) of the top switch 20.
  const auto gpu =
      at({bridge(14), bridge(12), bridge(13), bridge(20), bridge(30), host(40)}, 1, {0});
  const auto nic = at({bridge(11), bridge(20), bridge(30), host(40)}, 1, {0});
  EXPECT_EQ(classify(gpu, nic), Closeness::kPxb);
}

TEST(Closeness, SameHostBridgeIsPhb) {
  const auto gpu = at({bridge(31), host(40)}, 1, {0});
  const auto nic = at({bridge(32), host(40)}, 1, {0});
  EXPECT_EQ(classify(gpu, nic), Closeness::kPhb);
  EXPECT_EQ(classify(at({host(40)}, 1, {0}), at({host(40)}, 1, {0})), Closeness::kPhb);
}

TEST(Closeness, OtherHostBridgeInTheNumaNodeIsNode) {
  EXPECT_EQ(classify(at({bridge(31), host(40)}, 1, {0}), at({bridge(51), host(50)}, 1, {0})),
            Closeness::kNode);
  // Different CPU-side objects with the same NUMA node (e.g. package vs. group) are still NODE.
  EXPECT_EQ(classify(at({host(40)}, 1, {2}), at({host(50)}, 2, {2})), Closeness::kNode);
}

TEST(Closeness, AcrossNumaNodesIsSys) {
  EXPECT_EQ(classify(at({host(40)}, 1, {0}), at({host(50)}, 2, {1})), Closeness::kSys);
  EXPECT_EQ(classify(at({host(40)}, 1, {}), at({host(50)}, 2, {})), Closeness::kSys);
}

TEST(Closeness, Names) {
  EXPECT_STREQ(closeness_name(Closeness::kPix), "PIX");
  EXPECT_STREQ(closeness_name(Closeness::kPxb), "PXB");
  EXPECT_STREQ(closeness_name(Closeness::kPhb), "PHB");
  EXPECT_STREQ(closeness_name(Closeness::kNode), "NODE");
  EXPECT_STREQ(closeness_name(Closeness::kSys), "SYS");
}

}  // namespace
}  // namespace dtrain::topology
