// SPDX-License-Identifier: Apache-2.0
#include "core/fault_hint.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "core/parse.hpp"

namespace dtrain::core {
namespace {

constexpr std::string_view kVerb = "suspect ";

std::string clean_detail(std::string_view text) {
  std::string out;
  for (const char c : text.substr(0, kMaxFaultHintDetail)) {
    out += (c >= 0x20 && c < 0x7f) ? c : ' ';
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

}  // namespace

bool is_node_name(std::string_view text) {
  if (text.empty() || text.size() > 255 || text.front() == '-' || text.front() == '.') return false;
  return std::all_of(text.begin(), text.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-';
  });
}

std::string fault_hint_dir(const TopologyCache& cache) {
  return (cache.enabled ? cache.dir : TopologyCache{}.dir) + "/fault-hints";
}

std::string fault_hint_file_name(std::uint32_t job, std::uint32_t step, std::string_view host) {
  std::string name = std::to_string(job);
  name.append(".").append(std::to_string(step)).append(".").append(host);
  return name;
}

bool is_fault_hint_file_of(std::string_view name, std::uint32_t job, std::string_view host) {
  std::string prefix = std::to_string(job);
  prefix.append(".");
  std::string suffix(".");
  suffix.append(host);
  if (name.size() <= prefix.size() + suffix.size() || !name.starts_with(prefix) ||
      !name.ends_with(suffix)) {
    return false;
  }
  const std::string_view step =
      name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  return std::all_of(step.begin(), step.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::string format_fault_hint(const FaultHint& hint) {
  if (!is_node_name(hint.node)) {
    throw Error(ErrorKind::kInvalidInput,
                "fault hint: " + quote_for_error(hint.node) + " is not a node name");
  }
  std::string line = std::string(kVerb) + hint.node;
  const std::string detail = clean_detail(hint.detail);
  if (!detail.empty()) line += " " + detail;
  return line + "\n";
}

ParsedFaultHints parse_fault_hints(std::string_view bytes) {
  ParsedFaultHints out;
  while (!bytes.empty()) {
    const std::size_t end = bytes.find('\n');
    // A last line without its newline is cut off (the writer died, or the pipe was full).
    const bool complete = end != std::string_view::npos;
    const std::string_view line = bytes.substr(0, complete ? end : bytes.size());
    bytes.remove_prefix(complete ? end + 1 : bytes.size());
    if (line.empty()) continue;
    if (!complete || line.size() > kMaxFaultHintLine || !line.starts_with(kVerb)) {
      ++out.rejected;
      continue;
    }
    const std::string_view rest = line.substr(kVerb.size());
    const std::size_t space = rest.find(' ');
    FaultHint hint;
    hint.node = std::string(rest.substr(0, space));
    if (space != std::string_view::npos) hint.detail = clean_detail(rest.substr(space + 1));
    if (!is_node_name(hint.node) || out.hints.size() >= kMaxFaultHintsPerStep) {
      ++out.rejected;
      continue;
    }
    if (std::find(out.hints.begin(), out.hints.end(), hint) == out.hints.end()) {
      out.hints.push_back(std::move(hint));
    }
  }
  return out;
}

}  // namespace dtrain::core
