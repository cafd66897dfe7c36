// SPDX-License-Identifier: Apache-2.0
// The bootstrap's agreement protocol (bootstrap/agreement.hpp) for whole steps of simulated ranks
// (sim_fabric.hpp): the success path, and every disagreement with the message the bootstrap has
// always given for it.
#include <gtest/gtest.h>

#include <cerrno>

#include "bootstrap/rank_set.hpp"
#include "sim_scenario.hpp"

namespace {

using namespace dtrain::bootstrap;
using namespace dtrain::bootstrap::sim;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Every rank failed, and rank 0's report holds `line`.
void expect_failure_naming(const ScenarioResult& result, const std::string& line) {
  ASSERT_FALSE(result.aborted_by.has_value());
  for (std::size_t r = 0; r < result.ranks.size(); ++r) {
    ASSERT_TRUE(result.ranks[r].has_value());
    EXPECT_EQ(result.ranks[r]->outcome.kind, Outcome::Kind::kFailed) << "rank " << r;
  }
  EXPECT_TRUE(contains(result.outcome(0).report, line)) << result.outcome(0).report;
}

TEST(Agreement, EveryRankReadyWhenAllAgree) {
  Scenario scenario;
  scenario.ranks = 10;
  scenario.ranks_per_node = 4;
  const auto result = run_scenario(scenario);
  ASSERT_FALSE(result.aborted_by.has_value());
  for (int r = 0; r < 10; ++r) {
    const auto& rank = *result.ranks[static_cast<std::size_t>(r)];
    ASSERT_TRUE(rank.finished);
    EXPECT_EQ(rank.outcome.kind, Outcome::Kind::kReady) << r;
    EXPECT_EQ(rank.outcome.local_rank, r % 4) << r;
    EXPECT_EQ(rank.outcome.local_size, r < 8 ? 4 : 2) << r;
    EXPECT_EQ(rank.counts.records_decoded, 0u) << r;
    EXPECT_GT(rank.probes, 0u) << r;
  }
  EXPECT_TRUE(result.outcome(0).notes.empty());
}

TEST(Agreement, OneRankAloneIsReady) {
  Scenario scenario;
  scenario.ranks = 1;
  const auto result = run_scenario(scenario);
  EXPECT_EQ(result.outcome(0).kind, Outcome::Kind::kReady);
}

TEST(Agreement, WithoutThePluginRankZeroSaysSoOnce) {
  Scenario scenario;
  scenario.plugin = false;
  const auto result = run_scenario(scenario);
  ASSERT_EQ(result.outcome(0).kind, Outcome::Kind::kReady);
  ASSERT_EQ(result.outcome(0).notes.size(), 1u);
  EXPECT_TRUE(contains(result.outcome(0).notes[0], "note: no DTRAIN_* variables"));
  EXPECT_TRUE(result.outcome(1).notes.empty());
  // The preflight's endpoints were exchanged with the peers instead.
  EXPECT_GT(result.ranks[1]->probes, 0u);
}

TEST(Agreement, MissingRanksAreNamedByRankZeroAtTheDeadline) {
  Scenario scenario;
  scenario.ranks = 12;
  scenario.timeout = std::chrono::seconds(10);
  scenario.missing = {3, 4, 9};
  const auto result = run_scenario(scenario);
  ASSERT_EQ(result.aborted_by, 0);
  const Outcome& zero = result.outcome(0);
  EXPECT_EQ(zero.kind, Outcome::Kind::kTimedOut);
  EXPECT_EQ(zero.timeout,
            "timed out after 10 s waiting for all ranks to start the bootstrap; ranks 3-4,9 never "
            "arrived (died, or stuck before dtrain's bootstrap)");
}

TEST(Agreement, AMissingLastRankIsNamed) {
  Scenario scenario;
  scenario.ranks = 8;
  scenario.timeout = std::chrono::seconds(10);
  scenario.missing = {7};
  const auto result = run_scenario(scenario);
  ASSERT_EQ(result.aborted_by, 0);
  EXPECT_TRUE(contains(result.outcome(0).timeout, "; rank 7 never arrived"))
      << result.outcome(0).timeout;
}

TEST(Agreement, ADifferentBinaryIsTabled) {
  Scenario scenario;
  scenario.other_binary = {3};
  const auto result = run_scenario(scenario);
  expect_failure_naming(result,
                        "field            value             ranks\n"
                        "executable hash  5d2578010225653f  0-2,4-7\n"
                        "                 809602959a6d4a58  3\n");
  EXPECT_TRUE(contains(result.outcome(0).report, "pass --allow-mismatch"));
  EXPECT_EQ(result.outcome(5).summary,
            "the ranks do not run the same software (rank 0 prints the table)");
  EXPECT_EQ(result.ranks[0]->counts.records_decoded, 2u);  // rank 3's and the reference's
}

TEST(Agreement, ADifferentBinaryOnRankZeroIsTheMinority) {
  Scenario scenario;
  scenario.other_binary = {0};
  const auto result = run_scenario(scenario);
  expect_failure_naming(result,
                        "executable hash  809602959a6d4a58  0\n"
                        "                 5d2578010225653f  1-7\n");
}

TEST(Agreement, AllowedMismatchOnlyWarns) {
  Scenario scenario;
  scenario.other_binary = {6, 7};
  scenario.allow_mismatch = true;
  const auto result = run_scenario(scenario);
  for (const auto& rank : result.ranks) EXPECT_EQ(rank->outcome.kind, Outcome::Kind::kReady);
  ASSERT_EQ(result.outcome(0).notes.size(), 1u);
  EXPECT_TRUE(contains(result.outcome(0).notes[0],
                       "warning: the ranks differ (continuing because of --allow-mismatch):"));
  EXPECT_TRUE(contains(result.outcome(0).notes[0], "809602959a6d4a58  6-7"));
}

TEST(Agreement, EnvironmentAgainstMpiNamesRankVariableAndBothValues) {
  Scenario scenario;
  scenario.local_rank_claims = {{1, 5}};
  const auto result = run_scenario(scenario);
  expect_failure_naming(result, "rank 1 on node1: DTRAIN_LOCAL_RANK=5 but MPI says local rank 1");
}

TEST(Agreement, OwnProblemsComeFirst) {
  Scenario scenario;
  scenario.problems = {{2, "DTRAIN_RANK=0 but SLURM_PROCID=2: changed after dtrain set them"}};
  scenario.local_rank_claims = {{1, 5}};
  const auto result = run_scenario(scenario);
  expect_failure_naming(result,
                        "bootstrap checks failed:\n  rank 2 on node1: DTRAIN_RANK=0 but "
                        "SLURM_PROCID=2: changed after dtrain set them");
  EXPECT_FALSE(contains(result.outcome(0).report, "DTRAIN_LOCAL_RANK=5"));
}

TEST(Agreement, NodeRanksFollowMpisNodes) {
  Scenario scenario;
  scenario.ranks = 12;
  scenario.ranks_per_node = 4;
  scenario.node_rank_claims = {{3, 1}, {4, 0}, {5, 0}, {6, 0}, {7, 0}};
  scenario.nnodes_claim = 2;
  const auto result = run_scenario(scenario);
  expect_failure_naming(result,
                        "  ranks 0-3 share a node according to MPI but have different "
                        "DTRAIN_NODE_RANK values (0-1)\n"
                        "  ranks 0-3 and 4-7 are on different nodes according to MPI but all have "
                        "DTRAIN_NODE_RANK=0\n"
                        "  DTRAIN_NNODES=2 but MPI places the ranks on 3 nodes");
}

TEST(Agreement, MixedLaunchesAreNamed) {
  Scenario scenario;
  scenario.without_plugin = {7};
  const auto result = run_scenario(scenario);
  expect_failure_naming(result,
                        "the DTRAIN_* variables are set on ranks 0-6 but absent on ranks "
                        "7; launch every task with srun --distributed-train");
}

TEST(Agreement, TheFirstDifferingListEntryIsFoundInALongList) {
  Scenario scenario;
  scenario.ranks = 5000;
  scenario.ranks_per_node = 8;
  scenario.list_edits = {{4097, {4000, "10.9.9.9:1"}}, {12, {4999, "10.1.1.1:2"}}};
  const auto result = run_scenario(scenario);
  const std::string source = "DTRAIN_ENDPOINTS_FILE=/proc/self/fd/512";
  expect_failure_naming(result, "the endpoint list differs from rank 0's (hash ");
  EXPECT_TRUE(contains(result.outcome(0).report, ") on ranks 12,4097; the first differing entry"));
  EXPECT_TRUE(contains(result.outcome(0).report,
                       "\n  rank 12 on node2: the endpoint list (" + source +
                           ") differs from rank 0's at entry 4999: rank 0 has '" +
                           generated_entry(4999, 8) + "', rank 12 has '10.1.1.1:2'"))
      << result.outcome(0).report;
  EXPECT_TRUE(contains(result.outcome(0).report,
                       "\n  rank 4097 on node513: the endpoint list (" + source +
                           ") differs from rank 0's at entry 4000: rank 0 has '" +
                           generated_entry(4000, 8) + "', rank 4097 has '10.9.9.9:1'"));
  // The differing rank says it itself too.
  EXPECT_EQ(result.outcome(12).summary,
            "the endpoint list (" + source + ") differs from rank 0's at entry 4999: rank 0 has '" +
                generated_entry(4999, 8) + "', rank 12 has '10.1.1.1:2'");
  // Only the two differing ranks' records reach rank 0, and nobody else sends one.
  EXPECT_EQ(result.ranks[0]->counts.records_decoded, 2u);
}

TEST(Agreement, ADifferingListOnRankZeroIsComparedWithTheMajority) {
  Scenario scenario;
  scenario.list_edits = {{0, {3, "10.9.9.9:1"}}};
  const auto result = run_scenario(scenario);
  expect_failure_naming(result, "differs from rank 1's at entry 3: rank 1 has '" +
                                    generated_entry(3, 4) + "', rank 0 has '10.9.9.9:1'");
}

TEST(Agreement, AHeldPortIsNamedWithTheRanksThatReachedTheImpostor) {
  Scenario scenario;
  scenario.listen_errors = {{6, EADDRINUSE}};
  scenario.impostors = {6};
  const auto result = run_scenario(scenario);
  expect_failure_naming(result,
                        "connectivity preflight failed:\n  rank 6 on node2 cannot listen on " +
                            generated_entry(6, 4) + ": address already in use");
  EXPECT_TRUE(contains(result.outcome(0).report,
                       "rank 5 on node2 reached rank 6's endpoint node2:29502 (" +
                           generated_entry(6, 4) +
                           "), but rank 6 could not listen there: another process answers on "
                           "that port"))
      << result.outcome(0).report;
  EXPECT_TRUE(contains(result.outcome(6).summary,
                       "connectivity preflight failed: rank 6 on node2 "
                       "cannot listen on "));
  // A held port is not a node's fault: no rank reports one.
  for (int r = 0; r < 8; ++r) EXPECT_FALSE(result.outcome(r).node_fault) << r;
}

TEST(Agreement, UnreachablePeersAreNamedWithTheirHostAndPort) {
  Scenario scenario;
  scenario.listen_errors = {{6, EADDRINUSE}};
  scenario.unreachable = {{2, 3}};
  const auto result = run_scenario(scenario);
  const std::string& report = result.outcome(0).report;
  EXPECT_TRUE(contains(report, "rank 2 on node1 cannot reach rank 3 at node1:29503 (" +
                                   generated_entry(3, 4) +
                                   "): no answer before the deadline (connection timed out)"))
      << report;
  EXPECT_TRUE(contains(report, "rank 7 on node2 cannot reach rank 6 at node2:29502 (" +
                                   generated_entry(6, 4) + "): connection refused"))
      << report;
}

// node2's network is down: every probe between its ranks and the other nodes' times out. The
// report names node2 as the node in every failed connection.
TEST(Agreement, ANodeInEveryFailedConnectionIsNamedAsTheSuspect) {
  Scenario scenario;
  scenario.ranks = 12;  // node1: 0-3, node2: 4-7, node3: 8-11
  for (int inside = 4; inside < 8; ++inside) {
    for (int outside : {0, 1, 2, 3, 8, 9, 10, 11}) {
      scenario.unreachable.insert({inside, outside});
      scenario.unreachable.insert({outside, inside});
    }
  }
  const auto result = run_scenario(scenario);
  const std::string& report = result.outcome(0).report;
  EXPECT_TRUE(contains(report, "cannot reach rank")) << report;
  EXPECT_TRUE(contains(report, "\n  suspect node: node2 (an end of all ")) << report;
  EXPECT_TRUE(contains(report,
                       "failed connections between nodes, with node1, node3); exclude "
                       "it (srun --exclude=node2) and tell the site"))
      << report;
  // Every rank knows it is a node fault (rank 0's verdict), so all exit with one status; the
  // ranks on node2, and only they, leave the fault hint for node2's epilog.
  for (int r = 0; r < 12; ++r) {
    EXPECT_EQ(result.outcome(r).kind, Outcome::Kind::kFailed) << r;
    EXPECT_TRUE(result.outcome(r).node_fault) << r;
    EXPECT_EQ(result.outcome(r).on_suspect_node, r >= 4 && r < 8) << r;
  }
}

TEST(Agreement, OneRankWithoutTheLaunchersNodesMakesEveryRankAskMpi) {
  Scenario scenario;
  scenario.ranks = 10;
  scenario.split_type = {3};
  auto result = run_scenario(scenario);
  for (int r = 0; r < 10; ++r) {
    EXPECT_EQ(result.outcome(r).kind, Outcome::Kind::kReady) << r;
    EXPECT_EQ(result.outcome(r).local_rank, r % 4) << r;
  }
  scenario.local_rank_claims = {{3, 0}};
  result = run_scenario(scenario);
  expect_failure_naming(result, "rank 3 on node1: DTRAIN_LOCAL_RANK=0 but MPI says local rank 3");
}

TEST(RankSet, FormatsLikeFormatRankSetAndSubtracts) {
  EXPECT_EQ(RankSet::of({5, 0, 1, 2, 7, 8}).format(), "0-2,5,7-8");
  EXPECT_EQ(RankSet::all(10).minus(RankSet::of({0, 3, 4, 9})).format(), "1-2,5-8");
  EXPECT_EQ(RankSet::all(3).minus(RankSet::all(3)).format(), "");
  RankSet set;
  for (int r : {4, 5, 6, 1, 9}) set.insert(r);
  EXPECT_EQ(set.format(), "1,4-6,9");
  EXPECT_TRUE(set.contains(5));
  EXPECT_FALSE(set.contains(7));
  EXPECT_EQ(set.count(), 5u);
  EXPECT_EQ(set.united(RankSet::of({2, 3, 7, 8})).format(), "1-9");
}

}  // namespace
