// SPDX-License-Identifier: Apache-2.0
// Fuzzes the --distributed-train value: core::parse_frameworks directly, then the real SPANK
// option callback registered by slurm_spank_init (spank_* fake), as srun and slurmstepd (as
// root, in remote context) invoke it with the user's text; and the same text as the value of
// --distributed-train-gpu-view, through core::parse_gpu_view and its callback.
//
// Input: the option value, bytes as given (the callback sees them up to the first NUL).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/config.hpp"
#include "core/error.hpp"
#include "fuzz_support.hpp"
#include "spank/state.hpp"
#include "spank_fake.hpp"

namespace {

using dtrain::core::FrameworkSet;
using dtrain::fuzz::require;

std::optional<FrameworkSet> parse(std::string_view text) {
  try {
    return dtrain::core::parse_frameworks(text);
  } catch (const dtrain::Error&) {
    return std::nullopt;
  }
}

void check_parser(std::string_view text) {
  const auto set = parse(text);
  if (!set) return;
  require(set->torch || set->paddle || set->tf || set->jax,
          "an accepted list selects no framework");
  const auto again = parse(dtrain::core::to_string(*set));
  require(again && *again == *set, "to_string(FrameworkSet) does not parse back",
          dtrain::core::to_string(*set));
}

void check_callback(const std::string& value, int remote) {
  dtrain::testing::reset_fake();
  dtrain::spank::state() = dtrain::spank::PluginState{};
  auto& fake = dtrain::testing::fake();
  fake.context = remote ? S_CTX_REMOTE : S_CTX_LOCAL;
  require(slurm_spank_init(dtrain::testing::handle(), 0, nullptr) == 0, "init without arguments");
  require(fake.options.size() == 2,
          "--distributed-train and --distributed-train-gpu-view were not registered");
  const spank_option* option = fake.options[0];
  require(std::string_view(option->name) == "distributed-train",
          "the first option is not --distributed-train", option->name);

  const int rc = option->cb(option->val, value.c_str(), remote);
  // sbatch forwards a value-less option as "(null)"; it means "all".
  const auto expected = parse(value == "(null)" ? std::string_view{} : std::string_view(value));
  const auto& state = dtrain::spank::state();
  if (expected) {
    require(rc == 0, "the callback refused a value the parser accepts", value);
    require(state.option_given && state.option_frameworks == *expected,
            "the callback stored another framework set", value);
    require(fake.errors.empty(), "the callback logged an error for a good value");
  } else {
    require(rc == -1, "the callback accepted a value the parser refuses", value);
    require(!state.option_given, "a refused value still enabled the plugin");
    require(fake.errors.size() == 1 && fake.errors[0].starts_with("dtrain: "),
            "a refusal must be one dtrain: error line");
  }
}

std::optional<dtrain::core::GpuView> parse_view(const std::string& text) {
  try {
    return dtrain::core::parse_gpu_view(text, "--distributed-train-gpu-view");
  } catch (const dtrain::Error&) {
    return std::nullopt;
  }
}

void check_gpu_view_callback(const std::string& value, int remote) {
  dtrain::testing::reset_fake();
  dtrain::spank::state() = dtrain::spank::PluginState{};
  auto& fake = dtrain::testing::fake();
  fake.context = remote ? S_CTX_REMOTE : S_CTX_LOCAL;
  require(slurm_spank_init(dtrain::testing::handle(), 0, nullptr) == 0, "init without arguments");
  require(fake.options.size() == 2, "--distributed-train-gpu-view was not registered");
  const spank_option* option = fake.options[1];
  require(std::string_view(option->name) == "distributed-train-gpu-view",
          "the second option is not --distributed-train-gpu-view", option->name);
  const int rc = option->cb(option->val, value.c_str(), remote);
  const auto expected = parse_view(value);
  const auto& state = dtrain::spank::state();
  if (expected) {
    require(rc == 0 && state.option_gpu_view == *expected,
            "the GPU view callback refused or changed a value the parser accepts", value);
    require(dtrain::core::to_string(*expected) == value, "to_string(GpuView) differs", value);
  } else {
    require(rc == -1 && !state.option_gpu_view,
            "the GPU view callback accepted a value the parser refuses", value);
    require(fake.errors.size() == 1 && fake.errors[0].starts_with("dtrain: "),
            "a refusal must be one dtrain: error line");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  check_parser(text);
  const std::string value = dtrain::fuzz::as_c_string(text);
  check_callback(value, size % 2);
  check_gpu_view_callback(value, size % 2);
  return 0;
}
