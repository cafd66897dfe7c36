// SPDX-License-Identifier: Apache-2.0
#pragma once
// The DTRAIN_* variables the plugin exports, read through a lookup function so that the
// logic is pure and testable, and the checks that they agree with what MPI reports.

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "bootstrap/fingerprint.hpp"

namespace dtrain::bootstrap {

using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;
using FileReader = std::function<std::string(const std::string& path)>;
using TaskVariables = std::map<std::string, std::string, std::less<>>;

// The process's own environment and files, for read_dtrain_env and resolve_timeout outside
// tests. read_whole_file throws dtrain::Error(kInvalidInput) naming the path.
std::optional<std::string> process_env(const std::string& name);
std::string read_whole_file(const std::string& path);

struct DtrainEnv {
  bool present = false;  // false: no DTRAIN_* variable at all (plain mpirun/srun)
  int rank = -1;
  int world_size = -1;
  int local_rank = -1;
  int local_world_size = -1;
  int node_rank = -1;
  int nnodes = -1;
  std::string current_endpoint;
  std::string endpoints;         // the full comma-separated list
  std::string endpoints_source;  // "DTRAIN_ENDPOINTS" or "DTRAIN_ENDPOINTS_FILE=<path>"
  std::optional<std::string> endpoints_hash;  // DTRAIN_ENDPOINTS_HASH, when the plugin set it
  // The task's variables that must agree with dtrain's (task_identity_variables()), as set.
  TaskVariables identity;
};

// Throws dtrain::Error(kInvalidInput) naming the variables when only some are set or a value
// is malformed.
DtrainEnv read_dtrain_env(const EnvLookup& lookup, const FileReader& read_file);

// Every name disagreement_after_dtrain reads: Slurm's ids of the task, dtrain's, and PyTorch's.
const std::vector<std::string>& task_identity_variables();

// What is wrong when the task's variables no longer say what dtrain set: DTRAIN_RANK and
// DTRAIN_LOCAL_RANK must be Slurm's SLURM_PROCID and SLURM_LOCALID, and, when dtrain exported
// PyTorch's names (DTRAIN_FRAMEWORKS), RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT
// must be dtrain's. Something that ran after dtrain changed them: a container plugin (pyxis)
// copying a container's environment over the task's. Names that are unset are not compared.
// "" when all agree.
std::string disagreement_after_dtrain(const TaskVariables& variables);

struct ListScan;  // endpoints.hpp

// Checks that need no other rank: the list's hash is DTRAIN_ENDPOINTS_HASH (when set), it has
// world_size entries and entry `rank` is the current endpoint. One message per problem. The
// second form takes the list's scan (scan_endpoint_list, with entry `rank` among the wanted).
std::vector<std::string> check_env_locally(const DtrainEnv& env);
std::vector<std::string> check_env_locally(const DtrainEnv& env, const ListScan& scan);

// Default 60 s; DTRAIN_BOOTSTRAP_TIMEOUT (seconds) overrides it; an explicit config value
// overrides both.
inline constexpr std::chrono::milliseconds kDefaultBootstrapTimeout{60'000};
std::chrono::milliseconds resolve_timeout(std::optional<std::chrono::milliseconds> configured,
                                          const EnvLookup& lookup);

// Where MPI puts this rank: world rank/size and its place among the ranks that share its node;
// node_leader is the lowest world rank there.
struct MpiPlacement {
  int rank = -1;
  int size = -1;
  int local_rank = -1;
  int local_size = -1;
  int node_leader = -1;
};

// Outcome of one connectivity probe from the rank that made it.
struct ProbeOutcome {
  int target = -1;
  int error = 0;  // 0: connected; else an errno value
};

// What the preflight's messages say about a rank (preflight_report.hpp).
struct RankRecord {
  MpiPlacement mpi;
  std::string hostname;
  std::string listen_endpoint;  // where this rank listens for the preflight
  int listen_errno = 0;         // 0: listening
};

}  // namespace dtrain::bootstrap

namespace dtrain::bootstrap {

// The CUDA device a rank uses. Where the plugin bound the task it exports DTRAIN_CUDA_DEVICE, the
// task's own device among those it sees (LOCAL_RANK in the node view, 0 where it sees its own
// GPUs only): that one, refused when it is not a visible device. Otherwise (plain mpirun, GPUs
// named by UUID or MIG instance, a plugin without the GPU view) local_rank modulo the number of
// visible devices.
int choose_device(int local_rank, int visible_devices, std::optional<int> plugin_device);

// DTRAIN_CUDA_DEVICE as choose_device takes it: unset when the variable is; throws
// Error(kInvalidInput) naming it when it is not a device index.
std::optional<int> plugin_cuda_device(const char* value);

}  // namespace dtrain::bootstrap
