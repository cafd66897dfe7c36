// SPDX-License-Identifier: Apache-2.0
// Fuzzes the plugstack.conf arguments: core::parse_plugin_args directly, then the same
// arguments through the real slurm_spank_init (spank_* fake), which must accept exactly what
// the parser accepts and report a refusal as one "dtrain:" error.
//
// Input: one argument per line (at most kMaxArgs; more lines are ignored).

#include <cstdint>
#include <string>
#include <vector>

#include "core/config.hpp"
#include "core/error.hpp"
#include "fuzz_support.hpp"
#include "spank/state.hpp"
#include "spank_fake.hpp"

namespace {

using dtrain::core::PluginConfig;
using dtrain::core::TopologySource;
using dtrain::fuzz::require;

constexpr std::size_t kMaxArgs = 32;

bool parses(const std::vector<std::string>& args, PluginConfig* out = nullptr) {
  try {
    PluginConfig config = dtrain::core::parse_plugin_args(args);
    if (out != nullptr) *out = std::move(config);
    return true;
  } catch (const dtrain::Error&) {
    return false;
  }
}

void check_config(const PluginConfig& config) {
  require(config.ports.first >= 1024 && config.ports.first <= config.ports.last, "port range");
  require(config.port_block >= 2 && config.port_block <= config.ports.size(), "port_block");
  const auto& topo = config.topology;
  require((topo.kind == TopologySource::Kind::kFile) ==
                  (!topo.path.empty() && topo.path.front() == '/') &&
              topo.path.find('\0') == std::string::npos,
          "topology is neither a mode nor an absolute path", topo.path);
  const auto& cache = config.topology_cache;
  require(cache.enabled == (!cache.dir.empty() && cache.dir.front() == '/') &&
              cache.dir.find('\0') == std::string::npos,
          "topology_cache is neither none nor an absolute path", cache.dir);
  require(
      config.host_suffix.find_first_not_of(
          "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-.") == std::string::npos,
      "suffix holds a character outside [A-Za-z0-9.-]", config.host_suffix);
  require(dtrain::core::parse_frameworks(dtrain::core::to_string(config.frameworks)) ==
              config.frameworks,
          "frameworks do not round-trip");
}

// slurm_spank_init as slurmstepd calls it (as root, in remote context) with argv from
// plugstack.conf, which cannot hold NUL bytes.
void check_spank_init(const std::vector<std::string>& args) {
  std::vector<std::string> c_args;
  for (const auto& arg : args) c_args.push_back(dtrain::fuzz::as_c_string(arg));
  std::vector<char*> argv;
  for (auto& arg : c_args) argv.push_back(arg.data());
  argv.push_back(nullptr);

  dtrain::testing::reset_fake();
  dtrain::spank::state() = dtrain::spank::PluginState{};
  dtrain::testing::fake().context = S_CTX_REMOTE;
  const int rc =
      slurm_spank_init(dtrain::testing::handle(), static_cast<int>(c_args.size()), argv.data());
  const auto& fake = dtrain::testing::fake();
  if (parses(c_args)) {
    require(rc == 0, "slurm_spank_init refused arguments the parser accepts");
    require(fake.errors.empty(), "slurm_spank_init logged an error for good arguments");
    require(fake.options.size() == 2,
            "--distributed-train and --distributed-train-gpu-view were not registered");
  } else {
    require(rc == -1, "slurm_spank_init accepted arguments the parser refuses");
    require(fake.errors.size() == 1, "a refusal must be one error line");
    require(fake.errors[0].starts_with("dtrain: "), "error without the dtrain: prefix",
            fake.errors[0]);
    require(fake.options.empty(), "option registered despite bad arguments");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  dtrain::fuzz::Fields fields(data, size);
  std::vector<std::string> args;
  while (!fields.done() && args.size() < kMaxArgs) args.emplace_back(fields.next());

  PluginConfig config;
  if (parses(args, &config)) check_config(config);
  check_spank_init(args);
  return 0;
}
