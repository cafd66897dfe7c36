#include <gtest/gtest.h>

#include <map>

#include "bootstrap/endpoints.hpp"
#include "bootstrap/environment.hpp"
#include "bootstrap/heap.hpp"
#include "core/error.hpp"

namespace {

using namespace dtrain::bootstrap;
using Vars = std::map<std::string, std::string>;

EnvLookup lookup_in(const Vars& vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    const auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

const FileReader kNoFiles = [](const std::string& path) -> std::string {
  throw dtrain::Error(dtrain::ErrorKind::kInvalidInput, "unexpected read of " + path);
};

// Rank 1 of 3: node 0 holds ranks 0-1, node 1 holds rank 2.
Vars plugin_vars() {
  return {{"DTRAIN_RANK", "1"},
          {"DTRAIN_WORLD_SIZE", "3"},
          {"DTRAIN_LOCAL_RANK", "1"},
          {"DTRAIN_LOCAL_WORLD_SIZE", "2"},
          {"DTRAIN_NODE_RANK", "0"},
          {"DTRAIN_NNODES", "2"},
          {"DTRAIN_CURRENT_ENDPOINT", "127.0.1.1:29501"},
          {"DTRAIN_ENDPOINTS", "127.0.1.1:29500,127.0.1.1:29501,127.0.1.2:29500"}};
}

TEST(Environment, AbsentWhenNoVariableIsSet) {
  EXPECT_FALSE(read_dtrain_env(lookup_in({}), kNoFiles).present);
}

TEST(Environment, ReadsEverything) {
  const auto env = read_dtrain_env(lookup_in(plugin_vars()), kNoFiles);
  EXPECT_TRUE(env.present);
  EXPECT_EQ(env.rank, 1);
  EXPECT_EQ(env.local_world_size, 2);
  EXPECT_EQ(env.endpoints_source, "DTRAIN_ENDPOINTS");
  EXPECT_TRUE(check_env_locally(env).empty());
}

TEST(Environment, ReadsTheListFromAFileWhenTooLongForTheEnvironment) {
  Vars vars = plugin_vars();
  const std::string list = vars["DTRAIN_ENDPOINTS"];
  vars.erase("DTRAIN_ENDPOINTS");
  vars["DTRAIN_ENDPOINTS_FILE"] = "/run/x/endpoints";
  const FileReader reader = [&](const std::string& path) {
    EXPECT_EQ(path, "/run/x/endpoints");
    return list + "\n";
  };
  const auto env = read_dtrain_env(lookup_in(vars), reader);
  EXPECT_EQ(env.endpoints, list);
  EXPECT_EQ(env.endpoints_source, "DTRAIN_ENDPOINTS_FILE=/run/x/endpoints");
}

TEST(Environment, PartialSetsNameWhatIsMissing) {
  Vars vars = plugin_vars();
  vars.erase("DTRAIN_NODE_RANK");
  vars.erase("DTRAIN_ENDPOINTS");
  try {
    read_dtrain_env(lookup_in(vars), kNoFiles);
    FAIL();
  } catch (const dtrain::Error& error) {
    const std::string what = error.what();
    EXPECT_NE(
        what.find("DTRAIN_NODE_RANK, DTRAIN_ENDPOINTS (or DTRAIN_ENDPOINTS_FILE) are missing"),
        std::string::npos)
        << what;
  }
}

TEST(Environment, BadNumbersAreRefused) {
  Vars vars = plugin_vars();
  vars["DTRAIN_RANK"] = "-1";
  EXPECT_THROW(read_dtrain_env(lookup_in(vars), kNoFiles), dtrain::Error);
}

TEST(Environment, LocalCheckComparesTheListWithThePluginsHash) {
  Vars vars = plugin_vars();
  vars["DTRAIN_ENDPOINTS_HASH"] = hex64(hash_text(vars["DTRAIN_ENDPOINTS"]));
  EXPECT_TRUE(check_env_locally(read_dtrain_env(lookup_in(vars), kNoFiles)).empty());
  vars["DTRAIN_ENDPOINTS_HASH"] = "0123456789abcdef";
  const auto problems = check_env_locally(read_dtrain_env(lookup_in(vars), kNoFiles));
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].rfind("DTRAIN_ENDPOINTS_HASH=0123456789abcdef does not match "
                              "DTRAIN_ENDPOINTS (its hash is ",
                              0),
            0u)
      << problems[0];
}

TEST(Environment, LocalCheckComparesCurrentEndpointWithTheList) {
  Vars vars = plugin_vars();
  vars["DTRAIN_CURRENT_ENDPOINT"] = "127.0.1.1:29509";
  const auto problems = check_env_locally(read_dtrain_env(lookup_in(vars), kNoFiles));
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0],
            "DTRAIN_CURRENT_ENDPOINT=127.0.1.1:29509 but entry 1 of DTRAIN_ENDPOINTS is "
            "127.0.1.1:29501");
  vars = plugin_vars();
  vars["DTRAIN_WORLD_SIZE"] = "4";
  EXPECT_EQ(check_env_locally(read_dtrain_env(lookup_in(vars), kNoFiles)).front(),
            "DTRAIN_ENDPOINTS has 3 entries but DTRAIN_WORLD_SIZE=4");
}

TEST(Environment, VariablesChangedAfterDtrainAreFound) {
  Vars vars = plugin_vars();
  vars["SLURM_PROCID"] = "1";
  vars["SLURM_LOCALID"] = "1";
  EXPECT_EQ(disagreement_after_dtrain(read_dtrain_env(lookup_in(vars), kNoFiles).identity), "");
  // Another task's variables on task 1.
  vars["DTRAIN_RANK"] = "0";
  vars["DTRAIN_LOCAL_RANK"] = "0";
  vars["DTRAIN_CURRENT_ENDPOINT"] = "127.0.1.1:29500";
  const auto env = read_dtrain_env(lookup_in(vars), kNoFiles);
  EXPECT_TRUE(check_env_locally(env).empty());
  const auto changed = disagreement_after_dtrain(env.identity);
  EXPECT_EQ(changed.rfind("DTRAIN_RANK=0 but SLURM_PROCID=1, DTRAIN_LOCAL_RANK=0 but "
                          "SLURM_LOCALID=1: changed after dtrain set them",
                          0),
            0u)
      << changed;
  // Short enough for the bootstrap's record, which keeps 400 bytes of a rank's problem.
  EXPECT_LT(changed.size(), 300u);
}

TEST(Environment, PytorchNamesAreComparedWhenDtrainExportedThem) {
  TaskVariables vars = {{"DTRAIN_RANK", "3"},
                        {"RANK", "3"},
                        {"DTRAIN_MASTER_PORT", "20000"},
                        {"MASTER_PORT", "64562"},
                        {"DTRAIN_MASTER_ADDR", "10.0.0.1"},
                        {"MASTER_ADDR", "node1"}};
  // Without torch in DTRAIN_FRAMEWORKS, MASTER_PORT is the user's own.
  EXPECT_EQ(disagreement_after_dtrain(vars), "");
  vars["DTRAIN_FRAMEWORKS"] = "paddle";
  EXPECT_EQ(disagreement_after_dtrain(vars), "");
  vars["DTRAIN_FRAMEWORKS"] = "torch,paddle";
  EXPECT_EQ(disagreement_after_dtrain(vars).rfind(
                "MASTER_ADDR=node1 but DTRAIN_MASTER_ADDR=10.0.0.1, MASTER_PORT=64562 but "
                "DTRAIN_MASTER_PORT=20000: ",
                0),
            0u);
  // Slurm's ids are compared only where Slurm set them.
  EXPECT_EQ(disagreement_after_dtrain({{"DTRAIN_RANK", "3"}, {"DTRAIN_LOCAL_RANK", "1"}}), "");
  EXPECT_EQ(disagreement_after_dtrain({{"DTRAIN_LOCAL_RANK", "1"}, {"SLURM_LOCALID", "0"}})
                .rfind("DTRAIN_LOCAL_RANK=1 but SLURM_LOCALID=0: ", 0),
            0u);
}

TEST(Environment, TimeoutPrecedence) {
  using std::chrono::milliseconds;
  EXPECT_EQ(resolve_timeout(std::nullopt, lookup_in({})), kDefaultBootstrapTimeout);
  EXPECT_EQ(resolve_timeout(std::nullopt, lookup_in({{"DTRAIN_BOOTSTRAP_TIMEOUT", "10"}})),
            milliseconds(10000));
  EXPECT_EQ(resolve_timeout(milliseconds(2500), lookup_in({{"DTRAIN_BOOTSTRAP_TIMEOUT", "10"}})),
            milliseconds(2500));
  EXPECT_THROW(resolve_timeout(std::nullopt, lookup_in({{"DTRAIN_BOOTSTRAP_TIMEOUT", "0"}})),
               dtrain::Error);
  EXPECT_THROW(resolve_timeout(std::nullopt, lookup_in({{"DTRAIN_BOOTSTRAP_TIMEOUT", "1m"}})),
               dtrain::Error);
}

TEST(Environment, KeepFreedMemoryDefaultsOnAndFollowsTheVariable) {
  EXPECT_TRUE(resolve_keep_freed_memory(std::nullopt, lookup_in({})));
  EXPECT_FALSE(
      resolve_keep_freed_memory(std::nullopt, lookup_in({{"DTRAIN_KEEP_FREED_MEMORY", "0"}})));
  EXPECT_TRUE(
      resolve_keep_freed_memory(std::nullopt, lookup_in({{"DTRAIN_KEEP_FREED_MEMORY", "1"}})));
  EXPECT_TRUE(resolve_keep_freed_memory(true, lookup_in({{"DTRAIN_KEEP_FREED_MEMORY", "0"}})));
  EXPECT_FALSE(resolve_keep_freed_memory(false, lookup_in({})));
  try {
    resolve_keep_freed_memory(std::nullopt, lookup_in({{"DTRAIN_KEEP_FREED_MEMORY", "yes"}}));
    FAIL() << "'yes' was accepted";
  } catch (const dtrain::Error& error) {
    EXPECT_NE(std::string(error.what()).find("DTRAIN_KEEP_FREED_MEMORY"), std::string::npos)
        << error.what();
  }
}

TEST(Environment, DeviceChoice) {
  EXPECT_EQ(choose_device(3, 1, true), 0);
  EXPECT_EQ(choose_device(5, 4, false), 1);
  EXPECT_THROW(choose_device(0, 0, true), dtrain::Error);
}

// Three ranks: 0 and 1 share a node (leader 0), 2 is alone (leader 2).
std::vector<RankRecord> agreeing_records() {
  std::vector<RankRecord> records(3);
  const int local_rank[] = {0, 1, 0};
  const int local_size[] = {2, 2, 1};
  const int leader[] = {0, 0, 2};
  const int node[] = {0, 0, 1};
  for (int r = 0; r < 3; ++r) {
    auto& rec = records[static_cast<std::size_t>(r)];
    rec.mpi = {r, 3, local_rank[r], local_size[r], leader[r]};
    rec.hostname = r < 2 ? "node1" : "node2";
    rec.env.present = true;
    rec.env.rank = r;
    rec.env.world_size = 3;
    rec.env.local_rank = local_rank[r];
    rec.env.local_world_size = local_size[r];
    rec.env.node_rank = node[r];
    rec.env.nnodes = 2;
    rec.endpoints_hash = 42;
  }
  return records;
}

TEST(Agreement, NothingToReportWhenEverythingMatches) {
  EXPECT_TRUE(check_env_agreement(agreeing_records()).empty());
  auto records = agreeing_records();
  for (auto& r : records) r.env = DtrainEnv{};
  EXPECT_TRUE(check_env_agreement(records).empty());  // launched without the plugin
}

TEST(Agreement, NamesRankVariableAndBothValues) {
  auto records = agreeing_records();
  records[1].env.local_rank = 0;
  records[2].env.rank = 7;
  const auto problems = check_env_agreement(records);
  ASSERT_EQ(problems.size(), 2u);
  EXPECT_EQ(problems[0], "rank 1 on node1: DTRAIN_LOCAL_RANK=0 but MPI says local rank 1");
  EXPECT_EQ(problems[1], "rank 2 on node2: DTRAIN_RANK=7 but MPI says 2");
}

TEST(Agreement, NodeRanksMustFollowMpisNodes) {
  auto records = agreeing_records();
  records[2].env.node_rank = 0;
  records[2].env.nnodes = 1;
  records[0].env.nnodes = 1;
  const auto problems = check_env_agreement(records);
  ASSERT_EQ(problems.size(), 2u);
  EXPECT_EQ(problems[0],
            "ranks 0-1 and 2 are on different nodes according to MPI but all have "
            "DTRAIN_NODE_RANK=0");
  EXPECT_EQ(problems[1], "DTRAIN_NNODES=1 but MPI places the ranks on 2 nodes");
}

TEST(Agreement, EndpointListHashesMustMatch) {
  auto records = agreeing_records();
  records[2].endpoints_hash = 43;
  const auto problems = check_env_agreement(records);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("differs from rank 0's (hash 000000000000002a) on ranks 2"),
            std::string::npos)
      << problems[0];
}

TEST(Agreement, MixedLaunchesAreNamed) {
  auto records = agreeing_records();
  records[1].env = DtrainEnv{};
  const auto problems = check_env_agreement(records);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("set on ranks 0,2 but absent on ranks 1"), std::string::npos);
}

TEST(Record, RoundTripsThroughItsFixedSizeEncoding) {
  RankRecord record = agreeing_records()[1];
  record.env.current_endpoint = "127.0.1.1:29501";
  record.listen_endpoint = "127.0.1.1:29501";
  record.listen_errno = 98;
  record.endpoints_hash = 0xfedcba9876543210ull;
  record.fingerprint = {"00ff", "0.1.0", "Open MPI v4.1.4", "none", "none", "none", "none"};
  record.problem = "something";
  record.early_probe_failures = std::vector<ProbeOutcome>{{3, 111}, {5, 110}};
  const auto bytes = encode_record(record);
  ASSERT_EQ(bytes.size(), kRecordBytes);
  const auto back = decode_record(bytes.data(), bytes.size(), 1);
  EXPECT_EQ(back.mpi.local_rank, 1);
  EXPECT_EQ(back.mpi.node_leader, 0);
  EXPECT_EQ(back.hostname, "node1");
  EXPECT_EQ(back.env.node_rank, 0);
  EXPECT_EQ(back.endpoints_hash, 0xfedcba9876543210ull);
  EXPECT_EQ(back.listen_errno, 98);
  EXPECT_EQ(back.fingerprint.mpi_library, "Open MPI v4.1.4");
  EXPECT_EQ(back.problem, "something");
  ASSERT_TRUE(back.early_probe_failures.has_value());
  ASSERT_EQ(back.early_probe_failures->size(), 2u);
  EXPECT_EQ((*back.early_probe_failures)[1].target, 5);
  EXPECT_EQ((*back.early_probe_failures)[1].error, 110);
  record.early_probe_failures.reset();
  EXPECT_FALSE(decode_record(encode_record(record).data(), kRecordBytes, 1)
                   .early_probe_failures.has_value());
}

TEST(Record, LongStringsAreShortenedToFit) {
  RankRecord record = agreeing_records()[0];
  record.hostname = std::string(5000, 'h');
  record.fingerprint.gpu_model = std::string(5000, 'g');
  record.problem = std::string(5000, 'p');
  EXPECT_EQ(encode_record(record).size(), kRecordBytes);
}

TEST(Record, ForeignBytesNameTheSendingRank) {
  const std::vector<char> junk(kRecordBytes, 'x');
  try {
    decode_record(junk.data(), junk.size(), 5);
    FAIL();
  } catch (const dtrain::Error& error) {
    EXPECT_EQ(error.kind(), dtrain::ErrorKind::kMismatch);
    EXPECT_NE(std::string(error.what()).find("rank 5"), std::string::npos);
  }
}

}  // namespace

namespace {

std::vector<RankRecord> records_on(const std::vector<std::string>& nodes) {
  std::vector<RankRecord> records(nodes.size());
  for (std::size_t r = 0; r < nodes.size(); ++r) records[r].launcher_node = nodes[r];
  return records;
}

}  // namespace

TEST(Placement, LauncherNodesGiveLocalRanksInRankOrder) {
  // Cyclic placement: node rank order need not follow rank order.
  const auto placements = placement_from_launcher_nodes(records_on({"b", "a", "b", "a", "b"}));
  ASSERT_TRUE(placements.has_value());
  const int local_rank[] = {0, 0, 1, 1, 2};
  const int local_size[] = {3, 2, 3, 2, 3};
  const int leader[] = {0, 1, 0, 1, 0};
  for (std::size_t r = 0; r < 5; ++r) {
    EXPECT_EQ((*placements)[r].rank, static_cast<int>(r));
    EXPECT_EQ((*placements)[r].size, 5);
    EXPECT_EQ((*placements)[r].local_rank, local_rank[r]) << r;
    EXPECT_EQ((*placements)[r].local_size, local_size[r]) << r;
    EXPECT_EQ((*placements)[r].node_leader, leader[r]) << r;
  }
}

TEST(Placement, OneRankWithoutALauncherNodeMeansAskMpi) {
  EXPECT_FALSE(placement_from_launcher_nodes(records_on({"a", "", "a"})).has_value());
}

TEST(Placement, TheNodeNameTravelsInTheRecord) {
  RankRecord record;
  record.launcher_node = "node7";
  EXPECT_EQ(decode_record(encode_record(record).data(), kRecordBytes, 0).launcher_node, "node7");
}
