// SPDX-License-Identifier: Apache-2.0
#pragma once
// dtrain-check's report as a readable table and as JSON. Pure.

#include <nlohmann/json.hpp>
#include <string>

#include "check/analysis.hpp"

namespace dtrain::check {

// Sections: nodes and GPUs, per-rank binding and ports, fingerprint, preflight, the
// NCCL/UCX/CUDA environment, then each finding with its symptom and fix, and the verdict.
std::string render_report(const CheckReport& report);

// The same content for --json; "findings" carry their kind's symptom and fix.
nlohmann::json report_to_json(const CheckReport& report);

}  // namespace dtrain::check
