// SPDX-License-Identifier: Apache-2.0
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
  // The plugin's device: its own GPU among the node view's eight, or device 0 of its own.
  EXPECT_EQ(choose_device(3, 8, 3), 3);
  EXPECT_EQ(choose_device(3, 1, 0), 0);
  // Without it: local rank modulo the visible devices.
  EXPECT_EQ(choose_device(5, 4, std::nullopt), 1);
  EXPECT_THROW(choose_device(0, 0, 0), dtrain::Error);
  try {
    choose_device(3, 1, 3);
    FAIL() << "device 3 of 1 was accepted";
  } catch (const dtrain::Error& error) {
    EXPECT_NE(std::string(error.what()).find("DTRAIN_CUDA_DEVICE=3"), std::string::npos)
        << error.what();
  }
  EXPECT_EQ(plugin_cuda_device(nullptr), std::nullopt);
  EXPECT_EQ(plugin_cuda_device("5"), 5);
  EXPECT_THROW(plugin_cuda_device("cuda:0"), dtrain::Error);
}

// A step of 100,000 ranks on 12,500 nodes of 8: the list is about 2 MB, past the 1 MiB that
// capped it once, and reaches the bootstrap from the plugin's memory file.
std::string list_of_100k_ranks() {
  std::string list;
  for (int r = 0; r < 100000; ++r) {
    const int node = r / 8;
    if (r > 0) list += ',';
    list += "10.";
    list += std::to_string(node >> 16);
    list += '.';
    list += std::to_string((node >> 8) & 255);
    list += '.';
    list += std::to_string(node & 255);
    list += ':';
    list += std::to_string(29500 + r % 8);
  }
  return list;
}

TEST(Environment, AHundredThousandRankListGoesThrough) {
  const std::string list = list_of_100k_ranks();
  ASSERT_GT(list.size(), std::size_t{1} << 20);
  Vars vars = {{"DTRAIN_RANK", "77777"},
               {"DTRAIN_WORLD_SIZE", "100000"},
               {"DTRAIN_LOCAL_RANK", "1"},
               {"DTRAIN_LOCAL_WORLD_SIZE", "8"},
               {"DTRAIN_NODE_RANK", "9722"},
               {"DTRAIN_NNODES", "12500"},
               {"DTRAIN_CURRENT_ENDPOINT", "10.0.37.250:29501"},
               {"DTRAIN_ENDPOINTS_FILE", "/run/dtrain/endpoints"}};
  vars["DTRAIN_ENDPOINTS_HASH"] = hex64(hash_text(list));
  const FileReader reader = [&](const std::string&) { return list + "\n"; };
  const auto env = read_dtrain_env(lookup_in(vars), reader);
  EXPECT_TRUE(check_env_locally(env).empty()) << check_env_locally(env).front();
  // What the bootstrap keeps of it: the count, the hash and its own and its peers' entries.
  const auto scan = scan_endpoint_list(env.endpoints, {77777, 77776, 77778, 11249, 0});
  EXPECT_EQ(scan.count, 100000u);
  EXPECT_EQ(scan.hash, hash_text(list));
  EXPECT_EQ(scan.entries.size(), 5u);
  EXPECT_EQ(scan.entries.at(77777), "10.0.37.250:29501");
  EXPECT_EQ(scan.entries.at(0), "10.0.0.0:29500");
  EXPECT_TRUE(check_env_locally(env, scan).empty());
  // Every entry still parses, list and all.
  EXPECT_EQ(parse_endpoint_list(env.endpoints, env.endpoints_source).size(), 100000u);
}

}  // namespace
