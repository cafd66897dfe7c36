#pragma once
// slurmstepd side: plan the step once per node (user_init), apply it per task (task_init).

#include "spank/spank_api.hpp"

namespace dtrain::spank {

void plan_node(spank_t sp);   // as the user, once per node per step
int apply_to_task(spank_t sp);  // as the user, in each task just before exec

}  // namespace dtrain::spank
