// SPDX-License-Identifier: Apache-2.0
#include "core/parse.hpp"

#include <charconv>

#include "core/error.hpp"

namespace dtrain::core {

std::string quote_for_error(std::string_view text) {
  constexpr std::size_t kShown = 64;
  std::string out = "'";
  for (char c : text.substr(0, kShown)) {
    const auto u = static_cast<unsigned char>(c);
    out += (u >= 0x20 && u < 0x7f) ? c : '?';
  }
  if (text.size() > kShown) out += "...(" + std::to_string(text.size()) + " bytes)";
  out += "'";
  return out;
}

void require_length(std::string_view text, std::string_view what, std::size_t max_bytes) {
  if (text.size() > max_bytes) {
    throw_invalid(std::string(what) + " is " + std::to_string(text.size()) +
                  " bytes long; the limit is " + std::to_string(max_bytes) + " bytes");
  }
}

std::uint64_t parse_unsigned(std::string_view text, std::string_view what, std::uint64_t min,
                             std::uint64_t max) {
  std::uint64_t value = 0;
  const char* first = text.data();
  const char* last = text.data() + text.size();
  if (text.empty() || text.front() < '0' || text.front() > '9') {
    throw_invalid(std::string(what) + ": expected a non-negative integer, got " +
                  quote_for_error(text));
  }
  auto [ptr, ec] = std::from_chars(first, last, value);
  if (ec == std::errc::result_out_of_range || (ec == std::errc() && value > max)) {
    throw_invalid(std::string(what) + ": " + quote_for_error(text) + " is too large (at most " +
                  std::to_string(max) + ")");
  }
  if (ec != std::errc() || ptr != last) {
    throw_invalid(std::string(what) + ": expected a non-negative integer, got " +
                  quote_for_error(text));
  }
  if (value < min) {
    throw_invalid(std::string(what) + ": " + quote_for_error(text) + " is too small (at least " +
                  std::to_string(min) + ")");
  }
  return value;
}

std::vector<std::string_view> split(std::string_view text, char sep) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  while (true) {
    const std::size_t pos = text.find(sep, start);
    if (pos == std::string_view::npos) {
      parts.push_back(text.substr(start));
      return parts;
    }
    parts.push_back(text.substr(start, pos - start));
    start = pos + 1;
  }
}

}  // namespace dtrain::core
