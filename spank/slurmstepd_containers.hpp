// SPDX-License-Identifier: Apache-2.0
#pragma once
// slurmstepd, for container plugins loaded beside dtrain (core/container_env.hpp): whatever
// order plugstack.conf loads them in, each task keeps its own variables.

#include "spank/spank_api.hpp"

namespace dtrain::spank {

// init_post_opt, as root: adds every task variable to PYXIS_CONTAINER_ENV, which pyxis reads in
// its own init_post_opt when it loads after dtrain. When pyxis loads first it has read it
// already, and dtrain's task_init, which then runs after pyxis's, sets the variables last.
void keep_task_variables_in_containers(spank_t sp);

// task_init, as the user: PYXIS_CONTAINER_ENV back to what the user had, so the program sees
// the job's own environment.
void restore_container_request(spank_t sp);

}  // namespace dtrain::spank
