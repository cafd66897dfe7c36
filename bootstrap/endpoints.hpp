// SPDX-License-Identifier: Apache-2.0
#pragma once
// Endpoint lists as the plugin exports them: "addr:port,addr:port,..." ordered by global rank.
// Pure: text in, plain data out.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
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

// Accepts "host:port" and "[v6addr]:port" of at most kMaxEndpointBytes. `what` names the input
// in errors.
inline constexpr std::size_t kMaxEndpointBytes = 512;
Endpoint parse_endpoint(std::string_view text, std::string_view what);
// Every entry parsed. No limit on the list's length: a 100,000-rank step's list is several
// megabytes; each entry is bounded by parse_endpoint.
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

// What a rank needs from the list without keeping it: one pass over the text for the entry
// count and the entries at `wanted` (its own and its preflight peers'), and the XXH3 hash.
struct ListScan {
  std::size_t count = 0;  // entries, as split at commas
  std::uint64_t hash = 0;
  std::map<std::size_t, std::string> entries;  // the wanted entries that exist
};
ListScan scan_endpoint_list(std::string_view text, const std::vector<std::size_t>& wanted);

// A list of entries read in index ranges, for the search of the first entry where two ranks'
// lists differ (agreement.cpp): the bootstrap's lists are text, the simulation's generated.
class EndpointList {
 public:
  virtual ~EndpointList() = default;
  virtual std::size_t count() const = 0;
  // Calls `visit` for entries [low, high) that exist, in order.
  virtual void visit(std::size_t low, std::size_t high,
                     const std::function<void(std::size_t, std::string_view)>& visit) const = 0;
};

// Over comma-separated text, which must outlive it. Keeps nothing per entry: each visit reads
// the text from its start.
class TextEndpointList final : public EndpointList {
 public:
  explicit TextEndpointList(std::string_view text) : text_(text) {}
  std::size_t count() const override;
  void visit(std::size_t low, std::size_t high,
             const std::function<void(std::size_t, std::string_view)>& visit) const override;

 private:
  std::string_view text_;
  mutable std::size_t count_ = 0;
};

// XXH3 of entries [low, high) of `list` and of how many of them exist: equal for two lists
// exactly when those entries are equal (up to hash collisions).
std::uint64_t entry_range_hash(const EndpointList& list, std::size_t low, std::size_t high);

}  // namespace dtrain::bootstrap
