#include "bootstrap/environment.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "bootstrap/endpoints.hpp"
#include "core/error.hpp"
#include "core/memory_file_io.hpp"
#include "core/parse.hpp"
#include "core/step_plan.hpp"

namespace dtrain::bootstrap {

namespace {

constexpr const char* kNumericVariables[] = {"DTRAIN_RANK",       "DTRAIN_WORLD_SIZE",
                                             "DTRAIN_LOCAL_RANK", "DTRAIN_LOCAL_WORLD_SIZE",
                                             "DTRAIN_NODE_RANK",  "DTRAIN_NNODES"};
constexpr int kMaxRanks = 1 << 24;
constexpr std::uint32_t kRecordMagic = 0x64747233;  // "dtr3"

int parse_int_variable(const std::string& name, const std::string& value) {
  return static_cast<int>(core::parse_unsigned(value, name, 0, kMaxRanks));
}

}  // namespace

std::optional<std::string> process_env(const std::string& name) {
  const char* value = std::getenv(name.c_str());
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

std::string read_whole_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_invalid("cannot read " + path + ": " + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

DtrainEnv read_dtrain_env(const EnvLookup& lookup, const FileReader& read_file) {
  std::vector<std::string> required(std::begin(kNumericVariables), std::end(kNumericVariables));
  required.push_back("DTRAIN_CURRENT_ENDPOINT");
  std::vector<std::string> missing;
  std::size_t found = 0;
  for (const auto& name : required) (lookup(name) ? ++found : (missing.push_back(name), 0));
  const auto list = lookup("DTRAIN_ENDPOINTS");
  const auto list_file = lookup("DTRAIN_ENDPOINTS_FILE");
  if (list || list_file) ++found;
  if (found == 0) return {};
  if (!list && !list_file) missing.push_back("DTRAIN_ENDPOINTS (or DTRAIN_ENDPOINTS_FILE)");
  if (!missing.empty()) {
    std::string names;
    for (const auto& name : missing) names += (names.empty() ? "" : ", ") + name;
    throw_invalid("some DTRAIN_* variables are set but " + names +
                  (missing.size() == 1 ? " is" : " are") +
                  " missing; launch with srun --distributed-train, or unset all DTRAIN_* "
                  "variables to run without the plugin");
  }
  DtrainEnv env;
  env.present = true;
  int* const targets[] = {&env.rank,      &env.world_size, &env.local_rank, &env.local_world_size,
                          &env.node_rank, &env.nnodes};
  for (std::size_t i = 0; i < std::size(kNumericVariables); ++i) {
    *targets[i] = parse_int_variable(kNumericVariables[i], *lookup(kNumericVariables[i]));
  }
  env.current_endpoint = *lookup("DTRAIN_CURRENT_ENDPOINT");
  parse_endpoint(env.current_endpoint, "DTRAIN_CURRENT_ENDPOINT");
  // The file wins: where both are set, DTRAIN_ENDPOINTS was inherited (from a batch script, an
  // outer step) and only the file is this step's. The plugin's memory file (/proc/self/fd/N) is
  // read as every reader reads it (core::read_memory_file: its label names this task, it is
  // sealed, it has DTRAIN_ENDPOINTS_HASH); any other path through read_file.
  if (list_file) {
    const auto from_memory = core::memory_file_descriptor(*list_file)
                                 ? core::read_memory_file("DTRAIN_ENDPOINTS", lookup)
                                 : std::nullopt;
    env.endpoints = from_memory ? *from_memory : read_file(*list_file);
    while (!env.endpoints.empty() &&
           (env.endpoints.back() == '\n' || env.endpoints.back() == ' ')) {
      env.endpoints.pop_back();
    }
    env.endpoints_source = "DTRAIN_ENDPOINTS_FILE=" + *list_file;
  } else {
    env.endpoints = *list;
    env.endpoints_source = "DTRAIN_ENDPOINTS";
  }
  parse_endpoint_list(env.endpoints, env.endpoints_source);
  env.endpoints_hash = lookup("DTRAIN_ENDPOINTS_HASH");
  for (const auto& name : task_identity_variables()) {
    if (auto value = lookup(name)) env.identity.emplace(name, std::move(*value));
  }
  return env;
}

const std::vector<std::string>& task_identity_variables() {
  static const std::vector<std::string> names = {
      "SLURM_PROCID",       "SLURM_LOCALID",     "DTRAIN_RANK",
      "DTRAIN_LOCAL_RANK",  "DTRAIN_WORLD_SIZE", "DTRAIN_MASTER_ADDR",
      "DTRAIN_MASTER_PORT", "DTRAIN_FRAMEWORKS", "RANK",
      "LOCAL_RANK",         "WORLD_SIZE",        "MASTER_ADDR",
      "MASTER_PORT"};
  return names;
}

std::string disagreement_after_dtrain(const TaskVariables& variables) {
  std::string differs;
  const auto compare = [&](const char* name, const char* must_equal) {
    const auto value = variables.find(name);
    const auto expected = variables.find(must_equal);
    if (value == variables.end() || expected == variables.end()) return;
    if (value->second == expected->second) return;
    differs += std::string(differs.empty() ? "" : ", ") + name + "=" + value->second + " but " +
               must_equal + "=" + expected->second;
  };
  compare("DTRAIN_RANK", "SLURM_PROCID");
  compare("DTRAIN_LOCAL_RANK", "SLURM_LOCALID");
  const auto frameworks = variables.find("DTRAIN_FRAMEWORKS");
  if (frameworks != variables.end() && frameworks->second.find("torch") != std::string::npos) {
    compare("RANK", "DTRAIN_RANK");
    compare("LOCAL_RANK", "DTRAIN_LOCAL_RANK");
    compare("WORLD_SIZE", "DTRAIN_WORLD_SIZE");
    compare("MASTER_ADDR", "DTRAIN_MASTER_ADDR");
    compare("MASTER_PORT", "DTRAIN_MASTER_PORT");
  }
  if (differs.empty()) return differs;
  return differs +
         ": changed after dtrain set them, by a plugin that ran after it (pyxis copies a "
         "container's environment over each task's). Load dtrain after pyxis, or leave out srun "
         "--container-env; see spank_dtrain(8), CONTAINERS";
}

std::vector<std::string> check_env_locally(const DtrainEnv& env) {
  std::vector<std::string> problems;
  if (!env.present) return problems;
  // The ranks compare hashes of their lists; one that no longer matches the plugin's was
  // changed on the way (an edited variable, a rewritten file).
  if (const auto actual = env.endpoints_hash ? core::endpoints_hash(env.endpoints) : "";
      env.endpoints_hash && *env.endpoints_hash != actual) {
    problems.push_back("DTRAIN_ENDPOINTS_HASH=" + *env.endpoints_hash + " does not match " +
                       env.endpoints_source + " (its hash is " + actual +
                       "): the list was changed after the plugin exported it; launch with srun "
                       "--distributed-train and leave the DTRAIN_* variables as they are");
  }
  const auto entries = core::split(env.endpoints, ',');
  if (static_cast<long>(entries.size()) != env.world_size) {
    problems.push_back(env.endpoints_source + " has " + std::to_string(entries.size()) +
                       " entries but DTRAIN_WORLD_SIZE=" + std::to_string(env.world_size));
  } else if (env.rank < 0 || env.rank >= env.world_size) {
    problems.push_back("DTRAIN_RANK=" + std::to_string(env.rank) +
                       " is outside DTRAIN_WORLD_SIZE=" + std::to_string(env.world_size));
  } else if (entries[static_cast<std::size_t>(env.rank)] != env.current_endpoint) {
    problems.push_back("DTRAIN_CURRENT_ENDPOINT=" + env.current_endpoint + " but entry " +
                       std::to_string(env.rank) + " of " + env.endpoints_source + " is " +
                       std::string(entries[static_cast<std::size_t>(env.rank)]));
  }
  return problems;
}

std::chrono::milliseconds resolve_timeout(std::optional<std::chrono::milliseconds> configured,
                                          const EnvLookup& lookup) {
  if (configured) {
    if (configured->count() <= 0) throw_invalid("the bootstrap timeout must be positive");
    return *configured;
  }
  if (const auto text = lookup("DTRAIN_BOOTSTRAP_TIMEOUT")) {
    return std::chrono::seconds(
        core::parse_unsigned(*text, "DTRAIN_BOOTSTRAP_TIMEOUT (seconds)", 1, 86400));
  }
  return kDefaultBootstrapTimeout;
}

namespace {

// preflight_peers has at most 2 log2 n peers: a few hundred bytes even when every probe of a
// 100,000-rank step failed.
nlohmann::json encode_probe_failures(const std::optional<std::vector<ProbeOutcome>>& failures) {
  if (!failures) return nullptr;
  nlohmann::json list = nlohmann::json::array();
  for (const auto& failure : *failures) list.push_back({failure.target, failure.error});
  return list;
}

}  // namespace

std::vector<char> encode_record(const RankRecord& record) {
  const auto clip = [](const std::string& text, std::size_t limit) {
    return text.size() <= limit ? text : text.substr(0, limit);
  };
  nlohmann::json fingerprint = nlohmann::json::object();
  for (const auto& field : fingerprint_fields()) {
    fingerprint[field.label] = clip(record.fingerprint.*field.member, 160);
  }
  const nlohmann::json json = {
      {"magic", kRecordMagic},
      {"mpi",
       {record.mpi.rank, record.mpi.size, record.mpi.local_rank, record.mpi.local_size,
        record.mpi.node_leader}},
      {"host", clip(record.hostname, 128)},
      {"node", clip(record.launcher_node, 64)},
      {"env",
       {record.env.present, record.env.rank, record.env.world_size, record.env.local_rank,
        record.env.local_world_size, record.env.node_rank, record.env.nnodes}},
      {"current", clip(record.env.current_endpoint, 128)},
      {"eph", hex64(record.endpoints_hash)},
      {"listen", clip(record.listen_endpoint, 128)},
      {"lerr", record.listen_errno},
      {"pf", encode_probe_failures(record.early_probe_failures)},
      {"fp", fingerprint},
      {"problem", clip(record.problem, 400)},
  };
  const std::string text = json.dump(-1, '?', false, nlohmann::json::error_handler_t::replace);
  if (text.size() >= kRecordBytes) {
    throw Error(ErrorKind::kInternal, "bootstrap record of " + std::to_string(text.size()) +
                                          " bytes exceeds " + std::to_string(kRecordBytes));
  }
  std::vector<char> bytes(kRecordBytes, '\0');
  std::memcpy(bytes.data(), text.data(), text.size());
  return bytes;
}

RankRecord decode_record(const char* data, std::size_t size, int from_rank) {
  const std::string text(data, strnlen(data, size));
  const auto incompatible = [&] {
    return Error(ErrorKind::kMismatch,
                 "rank " + std::to_string(from_rank) +
                     " sent a bootstrap record this dtrain cannot read: every rank must run a "
                     "program built against the same dtrain version");
  };
  const auto json = nlohmann::json::parse(text, nullptr, false);
  if (json.is_discarded() || !json.is_object() || json.value("magic", 0u) != kRecordMagic) {
    throw incompatible();
  }
  try {
    RankRecord record;
    const auto& mpi = json.at("mpi");
    record.mpi = {mpi.at(0), mpi.at(1), mpi.at(2), mpi.at(3), mpi.at(4)};
    record.hostname = json.at("host");
    record.launcher_node = json.at("node");
    const auto& env = json.at("env");
    record.env.present = env.at(0);
    record.env.rank = env.at(1);
    record.env.world_size = env.at(2);
    record.env.local_rank = env.at(3);
    record.env.local_world_size = env.at(4);
    record.env.node_rank = env.at(5);
    record.env.nnodes = env.at(6);
    record.env.current_endpoint = json.at("current");
    record.endpoints_hash = std::stoull(json.at("eph").get<std::string>(), nullptr, 16);
    record.listen_endpoint = json.at("listen");
    record.listen_errno = json.at("lerr");
    if (const auto& failures = json.at("pf"); !failures.is_null()) {
      auto& decoded = record.early_probe_failures.emplace();
      for (const auto& failure : failures) decoded.push_back({failure.at(0), failure.at(1)});
    }
    record.problem = json.at("problem");
    for (const auto& field : fingerprint_fields()) {
      record.fingerprint.*field.member = json.at("fp").at(field.label).get<std::string>();
    }
    return record;
  } catch (const std::exception&) {
    throw incompatible();
  }
}

std::optional<std::vector<MpiPlacement>> placement_from_launcher_nodes(
    const std::vector<RankRecord>& records) {
  std::map<std::string, std::pair<int, int>> nodes;  // node -> (leader, size)
  for (std::size_t r = 0; r < records.size(); ++r) {
    if (records[r].launcher_node.empty()) return std::nullopt;
    ++nodes.try_emplace(records[r].launcher_node, static_cast<int>(r), 0).first->second.second;
  }
  std::vector<MpiPlacement> placements(records.size());
  std::map<std::string, int> seen;
  for (std::size_t r = 0; r < records.size(); ++r) {
    const auto& [leader, local_size] = nodes.at(records[r].launcher_node);
    placements[r] = {static_cast<int>(r), static_cast<int>(records.size()),
                     seen[records[r].launcher_node]++, local_size, leader};
  }
  return placements;
}

std::vector<std::string> check_env_agreement(const std::vector<RankRecord>& records) {
  std::vector<std::string> problems;
  std::vector<int> with_env, without_env;
  for (const auto& record : records) {
    (record.env.present ? with_env : without_env).push_back(record.mpi.rank);
  }
  if (with_env.empty()) return problems;
  if (!without_env.empty()) {
    problems.push_back("the DTRAIN_* variables are set on ranks " + format_rank_set(with_env) +
                       " but absent on ranks " + format_rank_set(without_env) +
                       "; launch every task with srun --distributed-train");
    return problems;
  }
  const auto mismatch = [&](const RankRecord& r, const char* variable, int env_value,
                            const std::string& mpi_says) {
    problems.push_back("rank " + std::to_string(r.mpi.rank) + " on " + r.hostname + ": " +
                       variable + "=" + std::to_string(env_value) + " but MPI says " + mpi_says);
  };
  // node leader -> node ranks claimed by the ranks there
  std::map<int, std::set<int>> node_ranks_by_leader;
  std::map<int, std::vector<int>> members_by_leader;
  for (const auto& r : records) {
    const int world = static_cast<int>(records.size());
    if (r.env.rank != r.mpi.rank)
      mismatch(r, "DTRAIN_RANK", r.env.rank, std::to_string(r.mpi.rank));
    if (r.env.world_size != world) {
      mismatch(r, "DTRAIN_WORLD_SIZE", r.env.world_size, std::to_string(world));
    }
    if (r.env.local_rank != r.mpi.local_rank) {
      mismatch(r, "DTRAIN_LOCAL_RANK", r.env.local_rank,
               "local rank " + std::to_string(r.mpi.local_rank));
    }
    if (r.env.local_world_size != r.mpi.local_size) {
      mismatch(r, "DTRAIN_LOCAL_WORLD_SIZE", r.env.local_world_size,
               std::to_string(r.mpi.local_size) + " ranks share its node");
    }
    node_ranks_by_leader[r.mpi.node_leader].insert(r.env.node_rank);
    members_by_leader[r.mpi.node_leader].push_back(r.mpi.rank);
  }
  // Node ranks: one value per MPI node, distinct across nodes, DTRAIN_NNODES nodes in all.
  std::map<int, std::vector<int>> leaders_by_node_rank;
  for (const auto& [leader, claimed] : node_ranks_by_leader) {
    if (claimed.size() > 1) {
      std::vector<int> values(claimed.begin(), claimed.end());
      problems.push_back("ranks " + format_rank_set(members_by_leader[leader]) +
                         " share a node according to MPI but have different DTRAIN_NODE_RANK "
                         "values (" +
                         format_rank_set(values) + ")");
    }
    leaders_by_node_rank[*claimed.begin()].push_back(leader);
  }
  for (const auto& [node_rank, leaders] : leaders_by_node_rank) {
    if (leaders.size() < 2) continue;
    std::string groups;
    for (int leader : leaders) {
      groups += (groups.empty() ? "" : " and ") + format_rank_set(members_by_leader[leader]);
    }
    problems.push_back("ranks " + groups +
                       " are on different nodes according to MPI but all have "
                       "DTRAIN_NODE_RANK=" +
                       std::to_string(node_rank));
  }
  const int nodes = static_cast<int>(node_ranks_by_leader.size());
  if (records.front().env.nnodes != nodes) {
    problems.push_back("DTRAIN_NNODES=" + std::to_string(records.front().env.nnodes) +
                       " but MPI places the ranks on " + std::to_string(nodes) + " nodes");
  }
  // The endpoint list must be the same text everywhere; ranks compare hashes.
  std::vector<int> differing;
  for (const auto& r : records) {
    if (r.endpoints_hash != records.front().endpoints_hash) differing.push_back(r.mpi.rank);
  }
  if (!differing.empty()) {
    problems.push_back("the endpoint list differs from rank 0's (hash " +
                       hex64(records.front().endpoints_hash) + ") on ranks " +
                       format_rank_set(differing) + "; the first differing entry of each follows");
  }
  return problems;
}

}  // namespace dtrain::bootstrap

namespace dtrain::bootstrap {

int choose_device(int local_rank, int visible_devices, bool bound_by_plugin) {
  if (visible_devices <= 0) {
    throw Error(ErrorKind::kResource,
                "no CUDA device is visible to this task (cudaGetDeviceCount found none); use "
                "--backend mpi on hosts without GPUs, or check CUDA_VISIBLE_DEVICES");
  }
  return bound_by_plugin ? 0 : local_rank % visible_devices;
}

}  // namespace dtrain::bootstrap
