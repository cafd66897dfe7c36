#include "bootstrap/endpoints.hpp"

#include <xxhash.h>

#include <cstdio>

#include "core/error.hpp"
#include "core/parse.hpp"

namespace dtrain::bootstrap {

Endpoint parse_endpoint(std::string_view text, std::string_view what) {
  core::require_length(text, what, 512);
  const auto colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0) {
    throw_invalid(std::string(what) + ": expected addr:port, got " + core::quote_for_error(text));
  }
  std::string_view host = text.substr(0, colon);
  if (host.front() == '[') {
    if (host.size() < 3 || host.back() != ']') {
      throw_invalid(std::string(what) + ": expected [v6addr]:port, got " +
                    core::quote_for_error(text));
    }
    host = host.substr(1, host.size() - 2);
  } else if (host.find(':') != std::string_view::npos) {
    throw_invalid(std::string(what) + ": write an IPv6 address as [addr]:port, got " +
                  core::quote_for_error(text));
  }
  const auto port =
      core::parse_unsigned(text.substr(colon + 1), std::string(what) + " port", 1, 65535);
  return Endpoint{std::string(host), static_cast<std::uint16_t>(port)};
}

std::vector<Endpoint> parse_endpoint_list(std::string_view text, std::string_view what) {
  core::require_length(text, what);
  if (text.empty()) throw_invalid(std::string(what) + " is empty");
  std::vector<Endpoint> endpoints;
  std::size_t index = 0;
  for (std::string_view item : core::split(text, ',')) {
    endpoints.push_back(
        parse_endpoint(item, std::string(what) + " entry " + std::to_string(index)));
    ++index;
  }
  return endpoints;
}

std::string to_string(const Endpoint& endpoint) {
  const bool v6 = endpoint.host.find(':') != std::string::npos;
  return (v6 ? "[" + endpoint.host + "]" : endpoint.host) + ":" + std::to_string(endpoint.port);
}

std::uint64_t hash_text(std::string_view text) {
  return XXH3_64bits(text.data(), text.size());
}

std::string hex64(std::uint64_t value) {
  char buffer[17];
  std::snprintf(buffer, sizeof buffer, "%016llx", static_cast<unsigned long long>(value));
  return buffer;
}

std::optional<EntryDifference> first_difference(std::string_view left, std::string_view right) {
  if (left == right) return std::nullopt;
  const auto left_items = core::split(left, ',');
  const auto right_items = core::split(right, ',');
  const std::size_t longest = std::max(left_items.size(), right_items.size());
  for (std::size_t i = 0; i < longest; ++i) {
    const bool has_left = i < left_items.size();
    const bool has_right = i < right_items.size();
    if (has_left && has_right && left_items[i] == right_items[i]) continue;
    return EntryDifference{i, has_left ? std::string(left_items[i]) : "(missing)",
                           has_right ? std::string(right_items[i]) : "(missing)"};
  }
  return std::nullopt;  // unreachable: unequal texts differ in some entry
}

}  // namespace dtrain::bootstrap
