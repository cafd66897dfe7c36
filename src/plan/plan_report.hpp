// SPDX-License-Identifier: Apache-2.0
#pragma once
// Text and JSON renderings of a step plan, for dtrain-plan.

#include <nlohmann/json.hpp>
#include <ostream>
#include <vector>

#include "core/step_plan.hpp"

namespace dtrain::plan {

void print_rank_table(std::ostream& out, const core::StepPlan& plan);
void print_task_env(std::ostream& out, std::uint32_t rank, const std::vector<core::EnvVar>& env);
nlohmann::json rank_table_json(const core::StepPlan& plan);
nlohmann::json env_json(const std::vector<core::EnvVar>& env);

}  // namespace dtrain::plan
