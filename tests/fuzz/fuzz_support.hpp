// SPDX-License-Identifier: Apache-2.0
#pragma once
// What every fuzz target shares: a deterministic split of the input into text fields, and a
// way to report a broken invariant as a crash that libFuzzer records with its input.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace dtrain::fuzz {

// Splits the input at '\n' into fields, in order; a field past the end is empty. Every byte
// other than '\n' (NUL included) stays in its field, so the parsers see hostile bytes too.
class Fields {
 public:
  Fields(const std::uint8_t* data, std::size_t size)
      : rest_(reinterpret_cast<const char*>(data), size) {}

  std::string_view next() {
    const auto end = rest_.find('\n');
    const std::string_view field = rest_.substr(0, end);
    rest_ = end == std::string_view::npos ? std::string_view{} : rest_.substr(end + 1);
    return field;
  }
  bool done() const { return rest_.empty(); }

 private:
  std::string_view rest_;
};

// The part of `text` a C caller would see (argv entries, option values, environment values).
inline std::string as_c_string(std::string_view text) {
  return std::string(text.substr(0, text.find('\0')));
}

// An invariant of the code under test does not hold: abort so libFuzzer saves the input.
[[noreturn]] inline void invariant_failed(const char* what, const std::string& detail = {}) {
  std::fprintf(stderr, "dtrain fuzz: invariant violated: %s %s\n", what, detail.c_str());
  std::abort();
}

inline void require(bool holds, const char* what, const std::string& detail = {}) {
  if (!holds) invariant_failed(what, detail);
}

}  // namespace dtrain::fuzz
