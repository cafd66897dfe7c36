// SPDX-License-Identifier: Apache-2.0
// dtrain-check's pure part: the findings table, the analysis of gathered facts, and rendering.
#include <gtest/gtest.h>

#include <cerrno>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "check/analysis.hpp"
#include "check/findings.hpp"
#include "check/render.hpp"
#include "core/error.hpp"

namespace dtrain::check {
namespace {

bootstrap::Fingerprint same_software() {
  return {"3f2a9c0d11e4b7a5", "0.1.0", "Open MPI v4.1.4", "none", "none", "none", "none"};
}

// A healthy -N4 -n8 block step as the plugin lays it out (4,2,1,1), no GPUs.
CheckInput healthy_step() {
  const std::vector<std::pair<std::string, int>> placement = {
      {"node1", 0}, {"node1", 1}, {"node1", 2}, {"node1", 3},
      {"node2", 0}, {"node2", 1}, {"node3", 0}, {"node4", 0}};
  CheckInput input;
  input.preflight_ran = true;
  for (int rank = 0; rank < 8; ++rank) {
    const auto& [host, local] = placement[static_cast<std::size_t>(rank)];
    RankFacts facts;
    facts.rank = rank;
    facts.local_rank = local;
    facts.host = host;
    facts.plugin = true;
    facts.environment = {{"CUDA_HOME", "/usr/local/cuda"},
                         {"DTRAIN_CPU_LIST", std::to_string(local)}};
    facts.cpus_allowed = std::to_string(local);
    const std::string endpoint =
        "127.0.1." + std::string(1, host.back()) + ":" + std::to_string(41000 + local);
    facts.ports = {{"endpoint", endpoint, false}};
    facts.listen_endpoint = endpoint;
    facts.interfaces = {"lo", "eth0"};
    facts.fingerprint = same_software();
    if (local == 0) facts.gpus = std::vector<GpuFacts>{};
    input.ranks.push_back(facts);
    input.preflight.push_back({{(rank + 1) % 8, 0}, {(rank + 7) % 8, 0}});
  }
  return input;
}

std::vector<std::string> ids(const CheckReport& report) {
  std::vector<std::string> out;
  for (const auto& finding : report.findings) out.push_back(finding.id);
  return out;
}

const Finding& only(const CheckReport& report, const std::string& id) {
  const Finding* found = nullptr;
  for (const auto& finding : report.findings) {
    if (finding.id != id) continue;
    EXPECT_EQ(found, nullptr) << "more than one " << id;
    found = &finding;
  }
  if (found == nullptr) throw std::runtime_error("no finding " + id);
  return *found;
}

TEST(FindingCatalog, EveryKindIsCompleteAndUnique) {
  std::set<std::string_view> seen;
  const std::regex kebab("[a-z0-9]+(-[a-z0-9]+)*");
  for (const auto& kind : finding_catalog()) {
    EXPECT_TRUE(seen.insert(kind.id).second) << kind.id;
    EXPECT_TRUE(std::regex_match(std::string(kind.id), kebab)) << kind.id;
    EXPECT_FALSE(kind.seen.empty()) << kind.id;
    EXPECT_FALSE(kind.symptom.empty()) << kind.id;
    EXPECT_FALSE(kind.fix.empty()) << kind.id;
  }
  EXPECT_EQ(finding_kind("connection-refused").severity, Severity::kProblem);
  EXPECT_NE(finding_kind("connection-refused").fix.find("Firewall or wrong interface"),
            std::string_view::npos);
  EXPECT_THROW(finding_kind("no-such-finding"), Error);
}

TEST(FindingCatalog, MarkdownHasOneRowPerKindBetweenTheMarkers) {
  const std::string markdown = troubleshooting_markdown();
  EXPECT_TRUE(markdown.starts_with(std::string(kTroubleshootingBegin) + "\n"));
  EXPECT_TRUE(markdown.ends_with(std::string(kTroubleshootingEnd) + "\n"));
  for (const auto& kind : finding_catalog()) {
    const std::string row =
        "| `" + std::string(kind.id) + "` | " + std::string(severity_name(kind.severity)) + " | ";
    EXPECT_NE(markdown.find(row), std::string::npos) << kind.id;
  }
  std::istringstream lines(markdown);
  std::string line;
  std::size_t rows = 0;
  while (std::getline(lines, line)) {
    if (line.starts_with("| `")) ++rows;
  }
  EXPECT_EQ(rows, finding_catalog().size());
}

// README.md carries the section generated from the same table; regenerate it with
// `dtrain-check --troubleshooting-markdown` and paste it over the old one when this fails.
TEST(FindingCatalog, ReadmeCarriesTheGeneratedSection) {
  std::ifstream in(DTRAIN_README_PATH);
  ASSERT_TRUE(in) << "cannot read " << DTRAIN_README_PATH;
  std::ostringstream text;
  text << in.rdbuf();
  const std::string readme = text.str();
  const auto begin = readme.find(kTroubleshootingBegin);
  const auto end = readme.find(kTroubleshootingEnd);
  ASSERT_NE(begin, std::string::npos) << "README.md lacks " << kTroubleshootingBegin;
  ASSERT_NE(end, std::string::npos) << "README.md lacks " << kTroubleshootingEnd;
  const std::string section = readme.substr(begin, end + kTroubleshootingEnd.size() - begin) + "\n";
  EXPECT_EQ(section, troubleshooting_markdown())
      << "README.md's troubleshooting section is stale: replace it with the output of "
         "dtrain-check --troubleshooting-markdown";
}

TEST(RankFactsJson, RoundTripsAndRejectsAnotherRanksFacts) {
  RankFacts facts = healthy_step().ranks[6];
  facts.gpus = std::vector<GpuFacts>{{"0000:1b:00.0", "NVIDIA H100"}};
  facts.ports.push_back({"master", "127.0.1.1:40999", true});
  facts.listen_errno = EADDRINUSE;
  const RankFacts back = rank_facts_from_json(to_json(facts), 6);
  EXPECT_EQ(to_json(back), to_json(facts));
  EXPECT_EQ(back.gpus, facts.gpus);
  EXPECT_EQ(back.ports, facts.ports);
  EXPECT_THROW(rank_facts_from_json(to_json(facts), 5), Error);
  EXPECT_THROW(rank_facts_from_json(nlohmann::json{{"rank", 6}}, 6), Error);
}

TEST(Analysis, HealthyStepHasNoProblems) {
  const CheckReport report = analyse(healthy_step());
  EXPECT_TRUE(report.healthy());
  EXPECT_EQ(report.exit_status(), 0);
  EXPECT_TRUE(report.findings.empty()) << ::testing::PrintToString(ids(report));
  ASSERT_EQ(report.nodes.size(), 4u);
  EXPECT_EQ(report.nodes[0].ranks, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(report.nodes[3].host, "node4");
  EXPECT_TRUE(report.plugin_in_effect);
  EXPECT_TRUE(report.fingerprint_table.empty());
  EXPECT_EQ(report.probes, 16u);
}

TEST(Analysis, NoPluginVariablesIsAProblem) {
  CheckInput input = healthy_step();
  for (auto& facts : input.ranks) {
    facts.plugin = false;
    facts.ports.clear();
    facts.environment.erase("DTRAIN_CPU_LIST");
  }
  const CheckReport report = analyse(input);
  EXPECT_FALSE(report.plugin_in_effect);
  EXPECT_EQ(report.exit_status(), 1);
  EXPECT_EQ(only(report, "plugin-not-in-effect").detail,
            "no rank has the plugin's DTRAIN_* variables (8 ranks on 4 nodes)");
}

TEST(Analysis, APortOfAnotherUserIsItsOwnFinding) {
  CheckInput input = healthy_step();
  input.ranks[6].ports[0].in_use = true;
  input.ranks[6].ports[0].held_by_other_user = true;
  input.ranks[6].ports[0].holder_uid = 65534;
  const CheckReport report = analyse(input);
  EXPECT_EQ(report.exit_status(), 1);
  const Finding& finding = only(report, "port-held-by-another-user");
  EXPECT_EQ(finding.node, "node3");
  EXPECT_NE(finding.detail.find("is held by a process of uid 65534"), std::string::npos)
      << finding.detail;
}

TEST(Analysis, HeldEndpointPortNamesNodeAndPortOnce) {
  CheckInput input = healthy_step();
  input.ranks[6].ports[0].in_use = true;
  input.ranks[6].listen_errno = EADDRINUSE;
  // The holder answers the peers' probes.
  const CheckReport report = analyse(input);
  EXPECT_EQ(report.exit_status(), 1);
  EXPECT_EQ(ids(report), std::vector<std::string>{"endpoint-port-in-use"});
  const Finding& finding = only(report, "endpoint-port-in-use");
  EXPECT_EQ(finding.node, "node3");
  EXPECT_EQ(finding.rank, 6);
  EXPECT_NE(finding.detail.find("127.0.1.3:41000"), std::string::npos) << finding.detail;
  EXPECT_FALSE(report.preflight_failures.empty());
}

TEST(Analysis, ABusyListenWithoutThePortCheckIsStillReported) {
  CheckInput input = healthy_step();
  input.ranks[2].listen_errno = EADDRINUSE;
  const CheckReport report = analyse(input);
  EXPECT_EQ(ids(report), (std::vector<std::string>{"endpoint-port-in-use",
                                                   "endpoint-answered-by-another-process"}));
  input.ranks[2].listen_errno = EADDRNOTAVAIL;
  input.preflight[1] = {{2, ECONNREFUSED}};
  input.preflight[3] = {{2, ECONNREFUSED}};
  EXPECT_EQ(ids(analyse(input)), std::vector<std::string>{"endpoint-listen-failed"});
}

TEST(Analysis, MasterPortInUse) {
  CheckInput input = healthy_step();
  input.ranks[0].ports.push_back({"master", "127.0.1.1:40999", true});
  const CheckReport report = analyse(input);
  const Finding& finding = only(report, "master-port-in-use");
  EXPECT_EQ(finding.node, "node1");
  EXPECT_NE(finding.detail.find("127.0.1.1:40999"), std::string::npos);
}

TEST(Analysis, RefusedAndTimedOutProbesAreGroupedPerTarget) {
  CheckInput input = healthy_step();
  input.preflight[5] = {{6, ECONNREFUSED}, {4, 0}};
  input.preflight[7] = {{6, ECONNREFUSED}, {0, ETIMEDOUT}};
  const CheckReport report = analyse(input);
  EXPECT_EQ(report.exit_status(), 1);
  const Finding& refused = only(report, "connection-refused");
  EXPECT_EQ(refused.node, "node3");
  EXPECT_NE(refused.detail.find("2 peers saw this: ranks 5,7"), std::string::npos)
      << refused.detail;
  EXPECT_EQ(only(report, "connection-timed-out").rank, 0);
  EXPECT_EQ(report.preflight_failures.size(), 3u);
}

TEST(Analysis, FingerprintMismatchIsAProblemUnlessAllowed) {
  CheckInput input = healthy_step();
  input.ranks[7].fingerprint.executable_hash = "91c0e2ab7730f1d2";
  CheckReport report = analyse(input);
  EXPECT_NE(report.fingerprint_table.find("91c0e2ab7730f1d2"), std::string::npos);
  EXPECT_EQ(only(report, "fingerprint-mismatch").detail,
            "the ranks differ in: executable hash (see the fingerprint table)");
  EXPECT_EQ(report.exit_status(), 1);
  input.allow_mismatch = true;
  report = analyse(input);
  EXPECT_EQ(only(report, "fingerprint-mismatch").severity, Severity::kWarning);
  EXPECT_EQ(report.exit_status(), 0);
}

TEST(Analysis, GpuFindings) {
  CheckInput input = healthy_step();
  const GpuFacts a{"0000:1b:00.0", "NVIDIA H100"}, b{"0000:43:00.0", "NVIDIA H100"};
  input.ranks[0].gpus = std::vector<GpuFacts>{a, b};
  input.ranks[0].environment["DTRAIN_GPU_BUS_IDS"] = a.bus_id;
  input.ranks[1].environment["DTRAIN_GPU_BUS_IDS"] = a.bus_id + "," + b.bus_id;
  input.ranks[7].environment["CUDA_VISIBLE_DEVICES"] = "0";
  const CheckReport report = analyse(input);
  EXPECT_NE(only(report, "gpu-shared").detail.find("ranks 0-1 are all bound to GPU 0000:1b:00.0"),
            std::string::npos);
  EXPECT_EQ(only(report, "gpu-binding-without-gpus").node, "node4");
  EXPECT_EQ(only(report, "gpu-count-differs").detail,
            "GPUs per node: node1: 2, node2: 0, node3: 0, node4: 0");
}

TEST(Analysis, CpuFindingsConcernBoundTasksOnly) {
  CheckInput input = healthy_step();
  input.ranks[4].cpus_allowed = "0-1";  // the plugin chose 0
  input.ranks[5].cpus_allowed = "1";
  input.ranks[2].environment["DTRAIN_CPU_LIST"] = "1,2";
  input.ranks[2].cpus_allowed = "1";
  input.ranks[3].environment["DTRAIN_CPU_LIST"] = "1";
  input.ranks[3].cpus_allowed = "1";
  const CheckReport report = analyse(input);
  EXPECT_EQ(only(report, "cpu-affinity-not-applied").rank, 4);
  std::vector<std::string> shared;
  for (const auto& finding : report.findings) {
    if (finding.id == "cpus-shared") shared.push_back(finding.detail);
  }
  EXPECT_EQ(shared, (std::vector<std::string>{"on node1, ranks 1-3 may run on the same CPUs (1)",
                                              "on node2, ranks 4-5 may run on the same CPUs (1)"}));
  EXPECT_EQ(report.exit_status(), 0);  // warnings only

  for (auto& facts : input.ranks) facts.environment.erase("DTRAIN_CPU_LIST");
  EXPECT_TRUE(analyse(input).findings.empty());
}

TEST(Analysis, SocketInterfaceMustExist) {
  CheckInput input = healthy_step();
  for (const std::string setting : {"eth", "=eth0", "^docker,lo", "=ib0,eth0"}) {
    input.ranks[4].environment["NCCL_SOCKET_IFNAME"] = setting;
    EXPECT_TRUE(analyse(input).healthy()) << setting;
  }
  input.ranks[4].environment["NCCL_SOCKET_IFNAME"] = "=eth";
  const CheckReport report = analyse(input);
  EXPECT_EQ(only(report, "socket-ifname-missing").detail,
            "NCCL_SOCKET_IFNAME==eth selects none of node2's interfaces (lo, eth0)");
}

TEST(Analysis, EnvironmentComparedAcrossNodesExceptPerTaskBinding) {
  CheckInput input = healthy_step();
  for (auto& facts : input.ranks) {
    facts.environment["NCCL_IB_HCA"] = "=mlx5_" + std::to_string(facts.local_rank);
    if (facts.host != "node3") facts.environment["NCCL_DEBUG"] = "INFO";
  }
  const CheckReport report = analyse(input);
  EXPECT_EQ(only(report, "nccl-environment-differs").detail,
            "NCCL_DEBUG differs: 'INFO' on node1,node2,node4 (ranks 0-5,7); unset on node3 "
            "(rank 6)");
  ASSERT_EQ(report.environment.size(), 3u);  // CUDA_HOME, NCCL_DEBUG, NCCL_IB_HCA
  EXPECT_TRUE(report.environment[2].per_task);
  EXPECT_EQ(report.environment[2].values.size(), 4u);
  EXPECT_EQ(report.exit_status(), 0);
}

TEST(Analysis, VariablesChangedAfterDtrainAreFound) {
  CheckInput input = healthy_step();
  for (auto& facts : input.ranks) {
    const std::string rank = std::to_string(facts.rank);
    const std::string local = std::to_string(facts.local_rank);
    facts.environment["SLURM_PROCID"] = rank;
    facts.environment["SLURM_LOCALID"] = local;
    facts.environment["DTRAIN_RANK"] = rank;
    facts.environment["DTRAIN_LOCAL_RANK"] = local;
    facts.environment["DTRAIN_FRAMEWORKS"] = "torch,paddle,tf";
    facts.environment["DTRAIN_MASTER_PORT"] = "20000";
    facts.environment["MASTER_PORT"] = "20000";
  }
  EXPECT_TRUE(analyse(input).healthy());
  // node2's tasks got another task's ids, and the container's own MASTER_PORT.
  input.ranks[5].environment["DTRAIN_RANK"] = "4";
  input.ranks[5].environment["DTRAIN_LOCAL_RANK"] = "0";
  input.ranks[4].environment["MASTER_PORT"] = "64562";
  input.ranks[5].environment["MASTER_PORT"] = "64562";
  const CheckReport report = analyse(input);
  const Finding& finding = only(report, "variables-changed-after-dtrain");
  EXPECT_EQ(finding.detail,
            "on node2, rank 4: MASTER_PORT=64562 but DTRAIN_MASTER_PORT=20000; rank 5: "
            "DTRAIN_RANK=4 but SLURM_PROCID=5, DTRAIN_LOCAL_RANK=0 but SLURM_LOCALID=1, "
            "MASTER_PORT=64562 but DTRAIN_MASTER_PORT=20000");
  EXPECT_EQ(finding.node, "node2");
  EXPECT_EQ(finding.rank, -1);
  EXPECT_EQ(report.exit_status(), 1);
}

TEST(Analysis, NtasksWithoutNtasksPerNodeIsExplainedForLightning) {
  CheckInput input = healthy_step();
  const std::string eight = "8";
  const std::string two = "2";
  for (auto& facts : input.ranks) {
    facts.environment.insert_or_assign("SLURM_NTASKS", eight);
    facts.environment.insert_or_assign("SLURM_NTASKS_PER_NODE", two);
  }
  EXPECT_TRUE(analyse(input).findings.empty());
  for (auto& facts : input.ranks) facts.environment.erase("SLURM_NTASKS_PER_NODE");
  const CheckReport report = analyse(input);
  EXPECT_EQ(only(report, "ntasks-without-ntasks-per-node").detail,
            "ranks 0-7 have SLURM_NTASKS=8 and no SLURM_NTASKS_PER_NODE (the step was launched "
            "with -n alone)");
  EXPECT_EQ(report.exit_status(), 0);  // a warning: only Lightning minds
  // One task alone never trips it.
  CheckInput single = healthy_step();
  const std::string one = "1";
  for (auto& facts : single.ranks) facts.environment.insert_or_assign("SLURM_NTASKS", one);
  EXPECT_TRUE(analyse(single).findings.empty());
}

TEST(Analysis, EndpointListHashesMustAgree) {
  CheckInput input = healthy_step();
  for (auto& facts : input.ranks) facts.environment["DTRAIN_ENDPOINTS_HASH"] = "00000000000000aa";
  EXPECT_TRUE(analyse(input).healthy());
  // node1 put 127.0.1.1 in its list (a Debian hosts line): its ranks hash differently.
  for (auto& facts : input.ranks) {
    if (facts.host == "node1") facts.environment["DTRAIN_ENDPOINTS_HASH"] = "00000000000000bb";
  }
  const CheckReport report = analyse(input);
  EXPECT_EQ(only(report, "endpoint-lists-differ").detail,
            "DTRAIN_ENDPOINTS_HASH differs: 00000000000000aa on node2,node3,node4 (ranks 4-7); "
            "00000000000000bb on node1 (ranks 0-3)");
  EXPECT_EQ(report.exit_status(), 1);
}

TEST(Render, TableAndJsonCarryTheSameReport) {
  CheckInput input = healthy_step();
  input.ranks[6].ports[0].in_use = true;
  const CheckReport report = analyse(input);
  const std::string text = render_report(report);
  for (const std::string expected :
       {"dtrain-check: 4 nodes, 8 ranks, plugin in effect", "  node4  7      none",
        "127.0.1.3:41000  IN USE", "  the same on every rank:",
        "16 probes between 8 ranks, all connected", "CUDA_HOME  /usr/local/cuda",
        "[problem] endpoint-port-in-use: on node3, rank 6's endpoint 127.0.1.3:41000",
        "      fix: Find the holder with", "Verdict: 1 problem\n"}) {
    EXPECT_NE(text.find(expected), std::string::npos) << expected << "\n" << text;
  }
  const nlohmann::json json = report_to_json(report);
  EXPECT_EQ(json["node_count"], 4);
  EXPECT_EQ(json["rank_count"], 8);
  EXPECT_EQ(json["exit_status"], 1);
  EXPECT_EQ(json["nodes"][2]["gpu_count"], 0);
  EXPECT_EQ(json["fingerprint"]["consistent"], true);
  EXPECT_EQ(json["findings"][0]["node"], "node3");
  EXPECT_EQ(json["findings"][0]["rank"], 6);
  EXPECT_EQ(json["findings"][0]["fix"], std::string(finding_kind("endpoint-port-in-use").fix));
  EXPECT_EQ(json["ranks"][6]["ports"][0]["in_use"], true);
}

}  // namespace
}  // namespace dtrain::check
