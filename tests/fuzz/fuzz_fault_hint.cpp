// SPDX-License-Identifier: Apache-2.0
// Fuzzes the fault hint parser (core/fault_hint.hpp) with what a job may write to
// DTRAIN_FAULT_HINT_FD: any bytes. slurmstepd parses them as root and the epilog reads what it
// kept, so the parser must never throw, and every hint it returns must be one that root can
// format and read back unchanged, with a node name and a printable, bounded detail.
//
// Input: the bytes a step's tasks wrote.

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/fault_hint.hpp"
#include "fuzz_support.hpp"

using dtrain::fuzz::require;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const auto parsed = dtrain::core::parse_fault_hints(bytes);
  require(parsed.hints.size() <= dtrain::core::kMaxFaultHintsPerStep, "hints per step");
  require(parsed.rejected <= size, "rejected lines");
  std::string kept;
  for (const auto& hint : parsed.hints) {
    require(dtrain::core::is_node_name(hint.node), "node name");
    require(hint.detail.size() <= dtrain::core::kMaxFaultHintDetail, "detail length");
    require(std::all_of(hint.detail.begin(), hint.detail.end(),
                        [](char c) { return c >= 0x20 && c < 0x7f; }),
            "printable detail");
    kept += dtrain::core::format_fault_hint(hint);
  }
  // What root keeps in the file reads back as the same hints, none rejected.
  const auto again = dtrain::core::parse_fault_hints(kept);
  require(again.rejected == 0, "root's own file rejected");
  require(again.hints == parsed.hints, "root's own file read back differently");
  // File names: a name the epilog takes for this job and host is exactly the one slurmstepd
  // would write for some step.
  const std::string name(bytes.substr(0, bytes.find('\n')));
  if (dtrain::core::is_fault_hint_file_of(name, 42, "node2")) {
    require(name.starts_with("42.") && name.ends_with(".node2"), "file of another job or host");
  }
  return 0;
}
