#pragma once
// Endpoint lists as the plugin exports them: "addr:port,addr:port,..." ordered by global rank.
// Pure: text in, plain data out.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dtrain::bootstrap {

struct Endpoint {
  std::string host;  // name or numeric address; IPv6 without the brackets
  std::uint16_t port = 0;
  bool operator==(const Endpoint&) const = default;
};

// Accepts "host:port" and "[v6addr]:port". `what` names the input in errors.
Endpoint parse_endpoint(std::string_view text, std::string_view what);
std::vector<Endpoint> parse_endpoint_list(std::string_view text, std::string_view what);
std::string to_string(const Endpoint& endpoint);

// XXH3_64bits of the text: ranks compare this instead of the whole list.
std::uint64_t hash_text(std::string_view text);
std::string hex64(std::uint64_t value);

struct EntryDifference {
  std::size_t index = 0;  // first entry that differs
  std::string left;       // "(missing)" when that list is shorter
  std::string right;
};

// First differing entry of two comma-separated lists; nullopt when they are equal.
std::optional<EntryDifference> first_difference(std::string_view left, std::string_view right);

}  // namespace dtrain::bootstrap
