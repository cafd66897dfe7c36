// SPDX-License-Identifier: Apache-2.0
#include "core/container_env.hpp"

#include <algorithm>
#include <array>
#include <vector>

#include "core/parse.hpp"

namespace dtrain::core {
namespace {

// tests/unit/test_spank_plugin.cpp checks that the plugin sets no name outside this list. Only
// the three lists can outgrow execve's limit (hence their NAME_FILE and NAME_HASH forms,
// core::memory_file_value_names()); the names of node and host fields are bounded.
constexpr std::array<std::string_view, 58> kTaskVariableNames = {
    // dtrain's own
    "DTRAIN_RANK", "DTRAIN_WORLD_SIZE", "DTRAIN_LOCAL_RANK", "DTRAIN_LOCAL_WORLD_SIZE",
    "DTRAIN_NODE_RANK", "DTRAIN_NNODES", "DTRAIN_MASTER_ADDR", "DTRAIN_MASTER_PORT",
    "DTRAIN_CURRENT_ENDPOINT", "DTRAIN_ENDPOINTS", "DTRAIN_ENDPOINTS_FILE", "DTRAIN_ENDPOINTS_HASH",
    "DTRAIN_FRAMEWORKS", "DTRAIN_CPU_LIST", "DTRAIN_GPU_BUS_IDS", "DTRAIN_CUDA_DEVICE",
    "DTRAIN_NIC",
    // PyTorch (env:// and torchrun)
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
    "ROLE_RANK", "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
    // torchrun started once per node
    "PET_NNODES", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT", "PET_NPROC_PER_NODE",
    // PaddlePaddle
    "PADDLE_TRAINER_ID", "PADDLE_TRAINERS_NUM", "PADDLE_TRAINER_ENDPOINTS",
    "PADDLE_TRAINER_ENDPOINTS_FILE", "PADDLE_TRAINER_ENDPOINTS_HASH", "PADDLE_CURRENT_ENDPOINT",
    "PADDLE_RANK_IN_NODE", "PADDLE_LOCAL_RANK", "PADDLE_GLOBAL_RANK", "PADDLE_GLOBAL_SIZE",
    "PADDLE_LOCAL_SIZE", "PADDLE_NNODES", "PADDLE_MASTER", "PADDLE_DISTRI_BACKEND",
    "FLAGS_selected_gpus",
    // TensorFlow
    "TF_CONFIG", "TF_CONFIG_FILE", "TF_CONFIG_HASH",
    // JAX
    "JAX_COORDINATOR_ADDRESS", "JAX_LOCAL_DEVICE_IDS",
    // binding
    "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "NCCL_IB_HCA", "NCCL_SOCKET_IFNAME",
    "UCX_NET_DEVICES", "OMP_NUM_THREADS"};

}  // namespace

std::span<const std::string_view> task_variable_names() {
  return kTaskVariableNames;
}

std::string with_task_variable_names(const std::optional<std::string>& user_list) {
  const std::string user = user_list.value_or("");
  const auto present = split(user, ',');
  std::string list = user;
  for (const auto name : kTaskVariableNames) {
    if (std::find(present.begin(), present.end(), name) != present.end()) continue;
    if (!list.empty()) list.push_back(',');
    list.append(name);
  }
  return list;
}

}  // namespace dtrain::core
