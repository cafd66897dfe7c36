// SPDX-License-Identifier: Apache-2.0
// The epilog's node check (core/node_check.hpp): only the node's own link drains it.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/config.hpp"
#include "core/error.hpp"
#include "core/node_check.hpp"

namespace dtrain::core {
namespace {

FabricLinkFacts link(std::optional<int> carrier, const std::string& operstate) {
  return {"node2", "198.19.0.12", std::string("fab0"), carrier, operstate};
}

TEST(NodeCheck, ALinkWithoutCarrierFailsAndNamesTheInterface) {
  const auto verdict = judge_fabric_link(link(0, "down"));
  EXPECT_FALSE(verdict.healthy);
  EXPECT_EQ(verdict.check, "fabric");
  EXPECT_EQ(verdict.detail, "fab0 (198.19.0.12) has no carrier, operstate down");
  EXPECT_EQ(drain_reason(verdict, 42),
            "dtrain: fabric: fab0 (198.19.0.12) has no carrier, operstate down (job 42)");
  // Administratively down: the kernel gives no carrier at all.
  const auto admin_down = judge_fabric_link(link(std::nullopt, "down"));
  EXPECT_FALSE(admin_down.healthy);
  EXPECT_EQ(admin_down.detail, "fab0 (198.19.0.12) is down, operstate down");
  EXPECT_FALSE(judge_fabric_link(link(std::nullopt, "lowerlayerdown")).healthy);
}

TEST(NodeCheck, AnUpLinkPasses) {
  EXPECT_TRUE(judge_fabric_link(link(1, "up")).healthy);
  // Virtual and some RDMA devices report "unknown" while they carry traffic.
  EXPECT_TRUE(judge_fabric_link(link(1, "unknown")).healthy);
}

TEST(NodeCheck, AnAddressNoInterfaceHoldsIsOnlyNoted) {
  // A suffix= that names another network is the same on every node: never a reason to drain.
  FabricLinkFacts facts = link(std::nullopt, "");
  facts.interface.reset();
  const auto verdict = judge_fabric_link(facts);
  EXPECT_TRUE(verdict.healthy);
  EXPECT_NE(verdict.note.find("no interface of node2 holds its fabric address 198.19.0.12"),
            std::string::npos)
      << verdict.note;
}

TEST(NodeCheck, AnExistingReasonIsNeverReplaced) {
  EXPECT_TRUE(may_set_drain_reason(std::nullopt));
  EXPECT_TRUE(may_set_drain_reason(std::string()));
  EXPECT_FALSE(may_set_drain_reason(std::string("admin: memory test")));
  EXPECT_FALSE(may_set_drain_reason(std::string("dtrain: fabric: fab0 ... (job 7)")));
}

TEST(NodeCheck, LongDetailsKeepTheJobInTheReason) {
  NodeCheckVerdict verdict;
  verdict.healthy = false;
  verdict.check = "fabric";
  verdict.detail = std::string(400, 'x');
  const std::string reason = drain_reason(verdict, 7);
  EXPECT_LE(reason.size(), 200u);
  EXPECT_EQ(reason.substr(reason.size() - 11), "... (job 7)");
  EXPECT_EQ(reason.rfind("dtrain: fabric: ", 0), 0u);
}

TEST(NodeCheck, ReachPeersFollowTheNodeInTheJobsListAndWrapAround) {
  const std::vector<std::string> nodes = {"n1", "n2", "n3", "n4"};
  EXPECT_EQ(reach_peers(nodes, "n3"), (std::vector<std::string>{"n4", "n1", "n2"}));
  EXPECT_EQ(reach_peers({"n1"}, "n1"), std::vector<std::string>{});
  std::vector<std::string> many;
  for (int i = 0; i < 100; ++i) many.push_back(std::string("n").append(std::to_string(i)));
  const auto peers = reach_peers(many, "n98");
  ASSERT_EQ(peers.size(), kMaxReachPeers);
  EXPECT_EQ(peers.front(), "n99");
  EXPECT_EQ(peers[1], "n0");
  // A node missing from the list (a name Slurm spells differently) probes from the start.
  EXPECT_EQ(reach_peers(nodes, "x"), (std::vector<std::string>{"n1", "n2", "n3", "n4"}));
}

FabricReachFacts reach(std::vector<PeerProbe> peers) {
  return {"fab0", "198.19.0.12", std::move(peers), 1500};
}

TEST(NodeCheck, ReachingNoPeerFailsAndNamesThem) {
  const auto verdict =
      judge_fabric_reach(reach({{"node3", "198.19.0.13", false}, {"node1", "198.19.0.11", false}}));
  EXPECT_FALSE(verdict.healthy);
  EXPECT_EQ(verdict.check, "fabric-reach");
  EXPECT_EQ(verdict.detail,
            "fab0 (198.19.0.12) reached none of 2 peers' fabric addresses (node3, node1) within "
            "1500 ms");
}

TEST(NodeCheck, OnePeerReachedIsHealthy) {
  // A dead peer is that peer's fault, not this node's.
  const auto verdict =
      judge_fabric_reach(reach({{"node3", "198.19.0.13", false}, {"node1", "198.19.0.11", true}}));
  EXPECT_TRUE(verdict.healthy);
  EXPECT_NE(verdict.note.find("reached 1 of 2"), std::string::npos) << verdict.note;
}

TEST(NodeCheck, PeersThatDoNotResolveAreNoEvidence) {
  EXPECT_TRUE(judge_fabric_reach(reach({{"node3", "", false}})).healthy);
  EXPECT_TRUE(judge_fabric_reach(reach({})).healthy);
  const auto verdict =
      judge_fabric_reach(reach({{"node3", "", false}, {"node1", "198.19.0.11", false}}));
  EXPECT_FALSE(verdict.healthy);
  EXPECT_NE(verdict.detail.find("none of 1 peers'"), std::string::npos) << verdict.detail;
}

TEST(NodeCheck, GpusThatStillAnswerPass) {
  EXPECT_TRUE(judge_gpus({}).healthy);
  EXPECT_TRUE(judge_gpus({{"0000:1b:00.0", 0x10de}, {"0000:43:00.0", 0x10de}}).healthy);
}

TEST(NodeCheck, AGpuOffTheBusOrGoneFailsAndNamesIt) {
  const auto silent = judge_gpus({{"0000:1b:00.0", 0x10de}, {"0000:43:00.0", 0xffff}});
  EXPECT_FALSE(silent.healthy);
  EXPECT_EQ(silent.check, "gpu");
  EXPECT_EQ(silent.detail,
            "1 of 2 GPUs slurmd found at start read 0xffff on the PCI bus (0000:43:00.0)");
  const auto both = judge_gpus(
      {{"0000:1b:00.0", std::nullopt}, {"0000:43:00.0", 0xffff}, {"0000:52:00.0", 0x10de}});
  EXPECT_EQ(both.detail,
            "2 of 3 GPUs slurmd found at start read 0xffff on the PCI bus (0000:43:00.0) or are "
            "gone from the PCI bus (0000:1b:00.0)");
  std::vector<GpuPresence> eight;
  for (int i = 0; i < 8; ++i) eight.push_back({"0000:0" + std::to_string(i) + ":00.0", 0xffff});
  const auto many = judge_gpus(eight);
  EXPECT_NE(many.detail.find("(0000:00:00.0, 0000:01:00.0, 0000:02:00.0, ...)"), std::string::npos)
      << many.detail;
  EXPECT_LE(drain_reason(many, 7).size(), 200U);
}

TEST(NodeCheck, IsOffUnlessTheSiteTurnsItOn) {
  EXPECT_FALSE(parse_plugin_args({}).node_check);
  EXPECT_TRUE(parse_plugin_args({"node_check=on"}).node_check);
  EXPECT_THROW(parse_plugin_args({"node_check=maybe"}), Error);
}

}  // namespace
}  // namespace dtrain::core
