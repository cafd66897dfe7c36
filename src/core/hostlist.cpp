#include "core/hostlist.hpp"

#include <slurm/slurm.h>

#include <cstdlib>
#include <memory>

#include "core/error.hpp"
#include "core/parse.hpp"

namespace dtrain::core {
namespace {

struct HostlistDeleter {
  void operator()(hostlist_t hl) const noexcept { slurm_hostlist_destroy(hl); }
};
using HostlistPtr = std::unique_ptr<std::remove_pointer_t<hostlist_t>, HostlistDeleter>;

bool has_control_or_space(std::string_view text) {
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x21 || u == 0x7f) return true;
  }
  return false;
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
