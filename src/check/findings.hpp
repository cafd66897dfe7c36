// SPDX-License-Identifier: Apache-2.0
#pragma once
// dtrain-check's findings: one table in code, used for the report and for the troubleshooting
// section of README.md (dtrain-check --troubleshooting-markdown). Pure.

#include <string>
#include <string_view>
#include <vector>

namespace dtrain::check {

// A problem makes dtrain-check exit 1; a warning is reported and does not.
enum class Severity { kProblem, kWarning };
std::string_view severity_name(Severity severity);

// One kind of finding: what was seen, the symptom it explains and the fix.
struct FindingKind {
  std::string_view id;
  Severity severity;
  std::string_view seen;
  std::string_view symptom;
  std::string_view fix;
};

// Every kind, in the order reports and README list them.
const std::vector<FindingKind>& finding_catalog();
// Throws dtrain::Error(kInternal) for an id that is not in the catalog.
const FindingKind& finding_kind(std::string_view id);

// One occurrence, as a report lists it.
struct Finding {
  std::string id;
  Severity severity =
      Severity::kProblem;  // the kind's, or lowered (fingerprint + --allow-mismatch)
  std::string node;        // "" when it concerns no single node
  int rank = -1;           // -1 when it concerns no single rank
  std::string detail;      // what exactly was seen, naming nodes, ranks and ports
};

Finding make_finding(std::string_view id, std::string node, int rank, std::string detail);

inline constexpr std::string_view kTroubleshootingBegin =
    "<!-- dtrain-check troubleshooting: begin -->";
inline constexpr std::string_view kTroubleshootingEnd =
    "<!-- dtrain-check troubleshooting: end -->";

// The README section, markers included: a short introduction and the catalog as a table.
std::string troubleshooting_markdown();

}  // namespace dtrain::check
