// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <cerrno>

#include "bootstrap/preflight_report.hpp"

namespace {

using namespace dtrain::bootstrap;

RankRecord rank_on(int rank, const std::string& host, const std::string& endpoint) {
  RankRecord record;
  record.mpi.rank = rank;
  record.hostname = host;
  record.listen_endpoint = endpoint;
  return record;
}

TEST(PreflightReport, ProbeFailureNamesBothRanksHostsPortAndErrno) {
  EXPECT_EQ(describe_probe_failure(rank_on(3, "node2", "127.0.1.2:29503"),
                                   rank_on(4, "node3", "127.0.1.3:29504"), ECONNREFUSED),
            "rank 3 on node2 cannot reach rank 4 at node3:29504 (127.0.1.3:29504): connection "
            "refused");
  EXPECT_NE(describe_probe_failure(rank_on(0, "a", "x:1"), rank_on(1, "b", "y:2"), ETIMEDOUT)
                .find("no answer before the deadline"),
            std::string::npos);
}

TEST(PreflightReport, ListenFailureNamesNodePortAndTheFix) {
  RankRecord record = rank_on(4, "node3", "127.0.1.3:29504");
  record.listen_errno = EADDRINUSE;
  const std::string message = describe_listen_failure(record);
  EXPECT_EQ(message.rfind("rank 4 on node3 cannot listen on 127.0.1.3:29504: address already in "
                          "use — another process holds the port; find it with \"ss -ltnp 'sport "
                          "= :29504'\" on node3",
                          0),
            0u)
      << message;
}

TEST(PreflightReport, CollectsEveryFailureInRankOrder) {
  std::vector<RankRecord> records = {rank_on(0, "node1", "127.0.1.1:29500"),
                                     rank_on(1, "node1", "127.0.1.1:29501"),
                                     rank_on(2, "node2", "127.0.1.2:29500")};
  records[2].listen_errno = EADDRINUSE;
  const std::vector<std::vector<ProbeOutcome>> outcomes = {
      {{1, 0}, {2, 0}},             // rank 0 reached an impostor on rank 2's port
      {{0, 0}, {2, ECONNREFUSED}},  // rank 1 was refused
      {{0, 0}, {1, 0}}};
  const auto failures = describe_preflight(records, outcomes);
  ASSERT_EQ(failures.size(), 3u);
  EXPECT_EQ(failures[0].rfind("rank 2 on node2 cannot listen", 0), 0u);
  EXPECT_EQ(failures[1],
            "rank 0 on node1 reached rank 2's endpoint node2:29500 (127.0.1.2:29500), but rank 2 "
            "could not listen there: another process answers on that port");
  EXPECT_EQ(failures[2].rfind("rank 1 on node1 cannot reach rank 2 at node2:29500", 0), 0u);
  EXPECT_TRUE(describe_preflight(records, {{}, {}, {}}).size() == 1);
}

TEST(PreflightReport, AbsentRanksAreNamedWithTheirEndpoints) {
  const std::vector<std::string> endpoints = {"10.0.0.1:29500", "10.0.0.1:29501", "10.0.0.2:29500",
                                              "10.0.0.3:29500"};
  EXPECT_EQ(describe_absent_ranks(endpoints, {{1, 0}, {2, 0}, {3, 0}}), "");
  EXPECT_EQ(describe_absent_ranks(endpoints, {{1, 0}, {2, ECONNREFUSED}, {3, 0}}),
            "rank 2 (10.0.0.2:29500) does not answer on the plugin's endpoint: died, or never "
            "reached dtrain's bootstrap");
  EXPECT_EQ(describe_absent_ranks(endpoints, {{1, ETIMEDOUT}, {2, ECONNREFUSED}, {3, 0}}),
            "ranks 1-2 (10.0.0.1:29501, 10.0.0.2:29500) do not answer on the plugin's endpoint: "
            "died, or never reached dtrain's bootstrap");
}

TEST(PreflightReport, ManyAbsentRanksKeepTheMessageShort) {
  std::vector<std::string> endpoints;
  std::vector<ProbeOutcome> outcomes;
  for (int r = 0; r < 100; ++r) {
    endpoints.push_back("node" + std::to_string(r) + ":1");
    if (r > 0) outcomes.push_back({r, r % 2 == 0 ? ECONNREFUSED : 0});
  }
  const std::string message = describe_absent_ranks(endpoints, outcomes);
  EXPECT_EQ(message.rfind("ranks 2,4,6,", 0), 0u) << message;
  EXPECT_NE(message.find("node16:1, ...)"), std::string::npos) << message;
  EXPECT_EQ(message.find("node18:1"), std::string::npos) << message;
}

// node2's fabric is down: every connection to or from it fails, the others work.
TEST(PreflightReport, TheNodeInEveryFailedLinkIsTheSuspect) {
  const std::vector<FailedLink> node2_down = {
      {"node1", "node2"}, {"node3", "node2"}, {"node2", "node1"}, {"node2", "node3"}};
  EXPECT_EQ(suspect_node(node2_down), "node2");
  EXPECT_EQ(describe_suspect(node2_down),
            "suspect node: node2 (an end of all 4 failed connections between nodes, with node1, "
            "node3); exclude it (srun --exclude=node2) and tell the site");
  // Links within a node say nothing about its network to the others.
  auto with_local = node2_down;
  with_local.push_back({"node3", "node3"});
  EXPECT_EQ(suspect_node(with_local), "node2");
}

TEST(PreflightReport, AmbiguousOrIndependentFailuresSuspectNobody) {
  // Only two nodes fail to talk: either may be at fault.
  const std::vector<FailedLink> one_pair = {{"node1", "node2"}, {"node2", "node1"}};
  EXPECT_EQ(suspect_node(one_pair), std::nullopt);
  EXPECT_EQ(describe_suspect(one_pair),
            "no suspect node: no single node is an end of all 2 failed connections between "
            "nodes");
  // Two faults that share no node.
  EXPECT_EQ(suspect_node({{"node1", "node2"}, {"node3", "node4"}}), std::nullopt);
  // Nothing failed between nodes: no line at all.
  EXPECT_EQ(suspect_node({}), std::nullopt);
  EXPECT_EQ(describe_suspect({{"node1", "node1"}}), "");
}

}  // namespace
