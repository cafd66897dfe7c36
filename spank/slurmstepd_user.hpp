// SPDX-License-Identifier: Apache-2.0
#pragma once
// slurmstepd, as the job's user: plan the step once per node (user_init), apply it to each
// task just before exec (task_init).

#include "spank/spank_api.hpp"

namespace dtrain::spank {

void plan_node(spank_t sp);     // user_init: once per node per step
int apply_to_task(spank_t sp);  // task_init: in each task

}  // namespace dtrain::spank
