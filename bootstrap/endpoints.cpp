// SPDX-License-Identifier: Apache-2.0
#include "bootstrap/endpoints.hpp"

#include <xxhash.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "core/error.hpp"
#include "core/parse.hpp"

namespace dtrain::bootstrap {

Endpoint parse_endpoint(std::string_view text, std::string_view what) {
  core::require_length(text, what, kMaxEndpointBytes);
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

ListScan scan_endpoint_list(std::string_view text, const std::vector<std::size_t>& wanted) {
  ListScan scan;
  scan.hash = hash_text(text);
  std::vector<std::size_t> sorted = wanted;
  std::sort(sorted.begin(), sorted.end());
  auto next = sorted.begin();
  std::size_t start = 0;
  while (true) {
    const void* comma =
        start < text.size() ? std::memchr(text.data() + start, ',', text.size() - start) : nullptr;
    const std::size_t end =
        comma ? static_cast<std::size_t>(static_cast<const char*>(comma) - text.data())
              : text.size();
    while (next != sorted.end() && *next < scan.count) ++next;
    if (next != sorted.end() && *next == scan.count) {
      scan.entries.emplace(scan.count, std::string(text.substr(start, end - start)));
    }
    ++scan.count;
    if (!comma) break;
    start = end + 1;
  }
  return scan;
}

std::size_t TextEndpointList::count() const {
  if (count_ == 0)
    count_ = static_cast<std::size_t>(std::count(text_.begin(), text_.end(), ',')) + 1;
  return count_;
}

void TextEndpointList::visit(
    std::size_t low, std::size_t high,
    const std::function<void(std::size_t, std::string_view)>& visit) const {
  // From the start each time: the search asks a few ranges, and an index of every entry would
  // be O(n) memory.
  std::size_t start = 0;
  for (std::size_t i = 0; i < high; ++i) {
    const auto comma = text_.find(',', start);
    const std::size_t end = comma == std::string_view::npos ? text_.size() : comma;
    if (i >= low) visit(i, text_.substr(start, end - start));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
}

std::uint64_t entry_range_hash(const EndpointList& list, std::size_t low, std::size_t high) {
  XXH3_state_t* state = XXH3_createState();
  XXH3_64bits_reset(state);
  std::uint64_t present = 0;
  list.visit(low, high, [&](std::size_t, std::string_view entry) {
    XXH3_64bits_update(state, entry.data(), entry.size());
    XXH3_64bits_update(state, ",", 1);
    ++present;
  });
  XXH3_64bits_update(state, &present, sizeof present);
  const auto hash = XXH3_64bits_digest(state);
  XXH3_freeState(state);
  return hash;
}

}  // namespace dtrain::bootstrap
