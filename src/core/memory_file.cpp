// SPDX-License-Identifier: Apache-2.0
#include "core/memory_file.hpp"

#include <array>
#include <limits>

#include "core/error.hpp"
#include "core/parse.hpp"
#include "core/step_plan.hpp"

namespace dtrain::core {
namespace {

constexpr std::string_view kLabelPrefix = "dtrain:";
constexpr std::string_view kLinkPrefix = "/memfd:";
constexpr std::string_view kLinkSuffix = " (deleted)";
constexpr std::string_view kSelfFd = "/proc/self/fd/";
// memfd_create(2): a name of at most NAME_MAX - strlen("memfd:") bytes.
constexpr std::size_t kMaxLabelBytes = 249;

constexpr std::array<std::string_view, 3> kValueNames = {"DTRAIN_ENDPOINTS",
                                                         "PADDLE_TRAINER_ENDPOINTS", "TF_CONFIG"};

bool is_variable_name(std::string_view name) {
  if (name.empty() || (name[0] >= '0' && name[0] <= '9')) return false;
  for (const char c : name) {
    if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'))
      return false;
  }
  return true;
}

bool is_digits(std::string_view text) {
  if (text.empty() || text.size() > 10) return false;
  for (const char c : text) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

std::optional<std::uint32_t> parse_id(std::string_view text) {
  if (!is_digits(text)) return std::nullopt;
  const std::uint64_t value = std::stoull(std::string(text));
  if (value > std::numeric_limits<std::uint32_t>::max()) return std::nullopt;
  return static_cast<std::uint32_t>(value);
}

// Cuts `text` at the first `sep`: the part before it, and `text` after it; nullopt without one.
std::optional<std::string_view> take_until(std::string_view& text, std::string_view sep) {
  const auto at = text.find(sep);
  if (at == std::string_view::npos) return std::nullopt;
  const auto part = text.substr(0, at);
  text.remove_prefix(at + sep.size());
  return part;
}

// A link target as the kernel gives it, shown in a message: printable, and not too long.
std::string printable(std::string_view target) {
  constexpr std::size_t kShown = 300;
  std::string out;
  for (const char c : target.substr(0, kShown)) {
    const auto u = static_cast<unsigned char>(c);
    out += (u >= 0x20 && u < 0x7f) ? c : '?';
  }
  if (target.size() > kShown) out += "...";
  return out;
}

std::string describe(const MemoryFileOwner& owner) {
  return "job " + std::to_string(owner.job_id) + " step " + std::to_string(owner.step_id) +
         " rank " + std::to_string(owner.rank);
}

std::uint32_t slurm_id(const EnvLookup& lookup, const std::string& variable,
                       const std::string& file_variable) {
  const auto text = lookup(variable);
  if (!text) {
    throw_invalid(variable + " is not set, so " + file_variable +
                  " cannot be checked against the task that made it; read it in a process of the "
                  "step's task (srun --distributed-train)");
  }
  return static_cast<std::uint32_t>(
      parse_unsigned(*text, variable, 0, std::numeric_limits<std::uint32_t>::max()));
}

}  // namespace

std::span<const std::string_view> memory_file_value_names() {
  return kValueNames;
}

std::string memory_file_label(const MemoryFileOwner& owner, const std::vector<std::string>& names) {
  std::string label = std::string(kLabelPrefix) + std::to_string(owner.job_id) + "." +
                      std::to_string(owner.step_id) + ":rank" + std::to_string(owner.rank) + ":";
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (!is_variable_name(names[i])) {
      throw Error(ErrorKind::kInternal,
                  "memory file label: " + quote_for_error(names[i]) + " is not a variable name");
    }
    label += (i == 0 ? "" : ",") + names[i];
  }
  if (names.empty() || label.size() > kMaxLabelBytes) {
    throw Error(ErrorKind::kInternal, "memory file label " + quote_for_error(label) +
                                          " is empty or longer than memfd_create's " +
                                          std::to_string(kMaxLabelBytes) + " bytes");
  }
  return label;
}

std::optional<MemoryFileLabel> parse_memory_file_link(std::string_view target) {
  if (!target.starts_with(kLinkPrefix) || !target.ends_with(kLinkSuffix)) return std::nullopt;
  target.remove_prefix(kLinkPrefix.size());
  target.remove_suffix(kLinkSuffix.size());
  if (!target.starts_with(kLabelPrefix)) return std::nullopt;
  target.remove_prefix(kLabelPrefix.size());
  const auto job = take_until(target, ".");
  const auto step = job ? take_until(target, ":rank") : std::nullopt;
  const auto rank = step ? take_until(target, ":") : std::nullopt;
  if (!rank) return std::nullopt;
  MemoryFileLabel label;
  const auto job_id = parse_id(*job), step_id = parse_id(*step), rank_id = parse_id(*rank);
  if (!job_id || !step_id || !rank_id) return std::nullopt;
  label.owner = {*job_id, *step_id, *rank_id};
  for (const auto name : split(target, ',')) {
    if (!is_variable_name(name)) return std::nullopt;
    label.names.emplace_back(name);
  }
  return label;
}

std::string memory_file_path(int descriptor) {
  return std::string(kSelfFd) + std::to_string(descriptor);
}

std::optional<int> memory_file_descriptor(std::string_view path) {
  if (!path.starts_with(kSelfFd)) return std::nullopt;
  path.remove_prefix(kSelfFd.size());
  if (!is_digits(path) || path.size() > 9) return std::nullopt;
  return std::stoi(std::string(path));
}

std::string value_hash(std::string_view value) {
  return endpoints_hash(value);
}

std::optional<MemoryFileExpectation> memory_file_expectation(const std::string& name,
                                                             const EnvLookup& lookup) {
  const std::string file_variable = name + "_FILE";
  const std::string hash_variable = name + "_HASH";
  auto path = lookup(file_variable);
  if (!path) return std::nullopt;
  MemoryFileExpectation expected;
  expected.name = name;
  const auto descriptor = memory_file_descriptor(*path);
  if (!descriptor) {
    throw_invalid(file_variable + "=" + quote_for_error(*path) +
                  " is not a memory file of the plugin (/proc/self/fd/N); unset it, or launch "
                  "with srun --distributed-train");
  }
  expected.path = std::move(*path);
  expected.descriptor = *descriptor;
  auto hash = lookup(hash_variable);
  if (!hash) {
    throw_invalid(hash_variable + " is not set, so " + file_variable +
                  "'s content cannot be checked; the plugin exports both");
  }
  if (hash->size() != 16 || hash->find_first_not_of("0123456789abcdef") != std::string::npos) {
    throw_invalid(hash_variable + "=" + quote_for_error(*hash) + " is not 16 hex digits");
  }
  expected.hash = std::move(*hash);
  expected.owner = {slurm_id(lookup, "SLURM_JOB_ID", file_variable),
                    slurm_id(lookup, "SLURM_STEP_ID", file_variable),
                    slurm_id(lookup, "SLURM_PROCID", file_variable)};
  if (const auto pid = lookup("SLURM_TASK_PID")) expected.task_pid = parse_id(*pid);
  return expected;
}

std::vector<std::string> memory_file_places(const MemoryFileExpectation& expected,
                                            std::uint32_t own_pid) {
  std::vector<std::string> places = {expected.path};
  if (expected.task_pid && *expected.task_pid != own_pid && *expected.task_pid != 0) {
    places.push_back("/proc/" + std::to_string(*expected.task_pid) + "/fd/" +
                     std::to_string(expected.descriptor));
  }
  return places;
}

std::string memory_file_mismatch(const MemoryFileExpectation& expected, const std::string& place,
                                 const MemoryFileSeen& seen) {
  const auto label = parse_memory_file_link(seen.link_target);
  const std::string shown = place + " (" + printable(seen.link_target) + ")";
  if (!label) return shown + " is not a memory file of dtrain";
  if (label->owner != expected.owner) {
    return shown + " is the memory file of " + describe(label->owner) + ", not of this task (" +
           describe(expected.owner) + "): the path reached another process";
  }
  bool named = false;
  for (const auto& name : label->names) named = named || name == expected.name;
  if (!named) return shown + " holds another value, not " + expected.name;
  if (!seen.sealed) return shown + " is not sealed against changes";
  if (const auto actual = value_hash(seen.content); actual != expected.hash) {
    return shown + " has hash " + actual + ", not " + expected.name + "_HASH=" + expected.hash +
           ": its content is not the value the plugin exported";
  }
  return {};
}

}  // namespace dtrain::core
