// SPDX-License-Identifier: Apache-2.0
#include "bootstrap/environment.hpp"

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
  // Not parsed as a whole: a 100,000-rank list is megabytes, and each rank needs its own entry
  // and its peers' (scan_endpoint_list); each entry is checked where it is used.
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
  if (!env.present) return {};
  std::vector<std::size_t> own;
  if (env.rank >= 0) own.push_back(static_cast<std::size_t>(env.rank));
  return check_env_locally(env, scan_endpoint_list(env.endpoints, own));
}

std::vector<std::string> check_env_locally(const DtrainEnv& env, const ListScan& scan) {
  std::vector<std::string> problems;
  if (!env.present) return problems;
  // The ranks compare hashes of their lists; one that no longer matches the plugin's was
  // changed on the way (an edited variable, a rewritten file).
  if (const auto actual = hex64(scan.hash); env.endpoints_hash && *env.endpoints_hash != actual) {
    problems.push_back("DTRAIN_ENDPOINTS_HASH=" + *env.endpoints_hash + " does not match " +
                       env.endpoints_source + " (its hash is " + actual +
                       "): the list was changed after the plugin exported it; launch with srun "
                       "--distributed-train and leave the DTRAIN_* variables as they are");
  }
  if (static_cast<long>(scan.count) != env.world_size) {
    problems.push_back(env.endpoints_source + " has " + std::to_string(scan.count) +
                       " entries but DTRAIN_WORLD_SIZE=" + std::to_string(env.world_size));
  } else if (env.rank < 0 || env.rank >= env.world_size) {
    problems.push_back("DTRAIN_RANK=" + std::to_string(env.rank) +
                       " is outside DTRAIN_WORLD_SIZE=" + std::to_string(env.world_size));
  } else if (const auto entry = scan.entries.find(static_cast<std::size_t>(env.rank));
             entry == scan.entries.end() || entry->second != env.current_endpoint) {
    problems.push_back("DTRAIN_CURRENT_ENDPOINT=" + env.current_endpoint + " but entry " +
                       std::to_string(env.rank) + " of " + env.endpoints_source + " is " +
                       (entry == scan.entries.end() ? std::string("missing") : entry->second));
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

}  // namespace dtrain::bootstrap

namespace dtrain::bootstrap {

int choose_device(int local_rank, int visible_devices, std::optional<int> plugin_device) {
  if (visible_devices <= 0) {
    throw Error(ErrorKind::kResource,
                "no CUDA device is visible to this task (cudaGetDeviceCount found none); use "
                "--backend mpi on hosts without GPUs, or check CUDA_VISIBLE_DEVICES");
  }
  if (!plugin_device) return local_rank % visible_devices;
  if (*plugin_device >= visible_devices) {
    throw Error(ErrorKind::kMismatch,
                "DTRAIN_CUDA_DEVICE=" + std::to_string(*plugin_device) +
                    " names no device: " + std::to_string(visible_devices) +
                    " are visible to this task. Something changed CUDA_VISIBLE_DEVICES after the "
                    "plugin set it; unset it in the job, or set DTRAIN_CUDA_DEVICE to match");
  }
  return *plugin_device;
}

std::optional<int> plugin_cuda_device(const char* value) {
  if (value == nullptr) return std::nullopt;
  return static_cast<int>(core::parse_unsigned(value, "DTRAIN_CUDA_DEVICE", 0, 1023));
}

}  // namespace dtrain::bootstrap
