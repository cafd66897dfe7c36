// SPDX-License-Identifier: Apache-2.0
#include "core/hostlist.hpp"

#include <slurm/slurm.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>

#include "core/error.hpp"
#include "core/parse.hpp"

namespace dtrain::core {
namespace {

// Slurm 23.11 made hostlist_t the struct itself (before, a pointer to it); the functions take
// a `struct hostlist*` in every release, so naming the struct compiles against all of them.
struct HostlistDeleter {
  void operator()(struct hostlist* hl) const noexcept { slurm_hostlist_destroy(hl); }
};
using HostlistPtr = std::unique_ptr<struct hostlist, HostlistDeleter>;

bool has_control_or_space(std::string_view text) {
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x21 || u == 0x7f) return true;
  }
  return false;
}

// The number of hosts `expr` names, from its bracket groups alone: per comma-separated item,
// the product of its groups' sizes, saturating just above `limit`. Nothing when a group is not
// a plain list of N or N-M ranges (nested or unbalanced brackets, signs, other bytes), which
// Slurm never writes. libslurm expands every group but the last while parsing, so
// "n[0-999]n[0-999]n[0-99]" would cost 10^5 entries (seconds and hundreds of MiB) before
// slurm_hostlist_count could be checked.
std::optional<std::uint64_t> host_count(std::string_view expr, std::uint64_t limit) {
  const auto saturate = [limit](std::uint64_t v) { return std::min(v, limit + 1); };
  const auto number = [](std::string_view digits, std::uint64_t& out) {
    return !digits.empty() && digits.size() <= 18 &&
           digits.find_first_not_of("0123456789") == std::string_view::npos &&
           std::from_chars(digits.data(), digits.data() + digits.size(), out).ec == std::errc();
  };
  std::uint64_t total = 0;
  std::uint64_t product = 1;
  for (std::size_t pos = 0; pos < expr.size();) {
    if (expr[pos] == ']') return std::nullopt;
    if (expr[pos] == ',') {
      total = saturate(total + product);
      product = 1;
      ++pos;
      continue;
    }
    if (expr[pos] != '[') {
      ++pos;
      continue;
    }
    const std::size_t close = expr.find_first_of("[]", pos + 1);
    if (close == std::string_view::npos || expr[close] != ']') return std::nullopt;
    std::uint64_t group = 0;
    for (std::string_view range : split(expr.substr(pos + 1, close - pos - 1), ',')) {
      const std::size_t dash = range.find('-');
      std::uint64_t first = 0;
      std::uint64_t last = 0;
      if (!number(range.substr(0, dash), first)) return std::nullopt;
      last = first;
      if (dash != std::string_view::npos && !number(range.substr(dash + 1), last)) {
        return std::nullopt;
      }
      if (last < first) return std::nullopt;
      group = saturate(group + (last - first + 1));
    }
    product = saturate(product * group);
    pos = close + 1;
  }
  return saturate(total + product);
}

}  // namespace

std::vector<std::string> expand_hostlist(std::string_view expr, std::size_t max_hosts) {
  require_length(expr, "host list");
  if (expr.empty()) throw_invalid("host list is empty");
  // libslurm also splits on spaces; Slurm never writes them in a step node list, so a
  // space or control character means the input is not what Slurm produced.
  if (has_control_or_space(expr)) {
    throw_invalid("host list " + quote_for_error(expr) + " contains spaces or control characters");
  }
  const auto bound = host_count(expr, max_hosts);
  if (!bound) {
    throw_invalid("host list " + quote_for_error(expr) +
                  " is malformed; brackets must hold N or N-M ranges, e.g. node[1-4,7]");
  }
  if (*bound > max_hosts) {
    throw_invalid("host list " + quote_for_error(expr) + " names more than the " +
                  std::to_string(max_hosts) + " hosts expected");
  }
  const std::string owned(expr);
  HostlistPtr hl(slurm_hostlist_create(owned.c_str()));
  if (!hl) throw_invalid("host list " + quote_for_error(expr) + " is malformed");
  const int count = slurm_hostlist_count(hl.get());
  if (count <= 0) throw_invalid("host list " + quote_for_error(expr) + " names no hosts");
  if (static_cast<std::size_t>(count) > max_hosts) {
    throw_invalid("host list " + quote_for_error(expr) + " names " + std::to_string(count) +
                  " hosts, more than the " + std::to_string(max_hosts) + " expected");
  }
  std::vector<std::string> hosts;
  hosts.reserve(static_cast<std::size_t>(count));
  while (char* host = slurm_hostlist_shift(hl.get())) {
    hosts.emplace_back(host);
    std::free(host);
  }
  for (const auto& host : hosts) {
    if (host.empty() || host.find_first_of("[],") != std::string::npos) {
      throw_invalid("host list " + quote_for_error(expr) + " is malformed near " +
                    quote_for_error(host));
    }
  }
  return hosts;
}

}  // namespace dtrain::core
