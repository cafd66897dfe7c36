// SPDX-License-Identifier: Apache-2.0
#include "spank/slurmstepd_containers.hpp"

#include "core/container_env.hpp"
#include "spank/spank_io.hpp"
#include "spank/state.hpp"

namespace dtrain::spank {

void keep_task_variables_in_containers(spank_t sp) {
  PluginState& st = state();
  st.container_env_of_user = get_env(sp, core::kPyxisKeepVariable);
  set_env(sp, core::kPyxisKeepVariable, core::with_task_variable_names(st.container_env_of_user));
  st.container_env_added = true;
}

void restore_container_request(spank_t sp) {
  const PluginState& st = state();
  if (!st.container_env_added) return;
  if (st.container_env_of_user) {
    set_env(sp, core::kPyxisKeepVariable, *st.container_env_of_user);
  } else {
    unset_env(sp, core::kPyxisKeepVariable);
  }
}

}  // namespace dtrain::spank
