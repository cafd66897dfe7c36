// SPDX-License-Identifier: Apache-2.0
#pragma once
// Strict number and list parsing shared by every parser in dtrain: no locale, no
// silent wrap-around, no leading '+' or '-', and error messages that quote the input.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dtrain::core {

// Longest string any parser accepts by default (require_length); anything longer is refused
// before parsing. Inputs that a valid step can make longer take their own bound: the endpoint
// list of a 100,000-rank step is several megabytes, so the bootstrap bounds each entry
// (bootstrap/endpoints.hpp, kMaxEndpointBytes), not the list.
inline constexpr std::size_t kMaxInputBytes = 1 << 20;

// Parses a decimal unsigned integer in [min, max]. `what` names the input in errors.
std::uint64_t parse_unsigned(std::string_view text, std::string_view what, std::uint64_t min,
                             std::uint64_t max);

std::vector<std::string_view> split(std::string_view text, char sep);

// Shortens a hostile string for inclusion in an error message.
std::string quote_for_error(std::string_view text);

void require_length(std::string_view text, std::string_view what,
                    std::size_t max_bytes = kMaxInputBytes);

}  // namespace dtrain::core
