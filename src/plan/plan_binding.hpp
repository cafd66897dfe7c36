// SPDX-License-Identifier: Apache-2.0
#pragma once
// dtrain-plan's view of topology binding: the same planning the plugin does on a node.

#include <nlohmann/json.hpp>
#include <ostream>
#include <string>

#include "core/step_plan.hpp"

namespace dtrain::plan {

// Loads `topology_xml`, plans the binding of `node`'s local tasks and prints the binding
// table and the GPU x NIC matrix. Returns the same as JSON.
nlohmann::json report_binding(std::ostream& out, const std::string& topology_xml,
                              const core::StepPlan& plan, std::uint32_t node);

}  // namespace dtrain::plan
