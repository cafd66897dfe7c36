// SPDX-License-Identifier: Apache-2.0
#pragma once
// What the plugin tells container plugins that run beside it. pyxis (--container-image) starts a
// node's container once, from the environment of the first task that reaches it, then copies
// that environment into every task of the node, overwriting what is there: every task would
// get the first task's rank, endpoint and GPUs. pyxis keeps a task's own value of each variable
// that PYXIS_CONTAINER_ENV (the environment form of --container-env) names. Pure.

#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace dtrain::core {

inline constexpr const char* kPyxisKeepVariable = "PYXIS_CONTAINER_ENV";

// Every name the plugin may export to a task: ranks, frameworks, binding, and the NAME_FILE form
// of the values too long for execve.
std::span<const std::string_view> task_variable_names();

// `user_list` (a comma-separated list of names, or nothing) followed by every task variable name
// it lacks.
std::string with_task_variable_names(const std::optional<std::string>& user_list);

}  // namespace dtrain::core
