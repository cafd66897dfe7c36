// SPDX-License-Identifier: Apache-2.0
#pragma once
// The binding part of the per-task environment contract, as name/value pairs. The caller
// (the SPANK plugin) decides whether to apply each one; it never overwrites a user's value.

#include <string>
#include <utility>
#include <vector>

#include "topology/binding.hpp"

namespace dtrain::topology {

using EnvVar = std::pair<std::string, std::string>;

// For a task with GPUs: CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER=PCI_BUS_ID, DTRAIN_GPU_BUS_IDS,
// DTRAIN_CUDA_DEVICE (the CUDA device index of its first own GPU among those it sees);
// NCCL_IB_HCA from the node's fabric HCAs, identical for every task of the node
// ("=mlx5_0:1,mlx5_1:1": '=' asks NCCL for exact names; ":port" only when the port is known);
// from the task's own nearest NICs: UCX_NET_DEVICES ("mlx5_0:1", only HCAs with a known port),
// NCCL_SOCKET_IFNAME ("=ibp24s0") and DTRAIN_NIC ("mlx5_0:1", or the netdev without an HCA);
// always, when the task has CPUs: OMP_NUM_THREADS (its cores) and DTRAIN_CPU_LIST ("0-13,112-125").
std::vector<EnvVar> binding_environment(const TaskBinding& task);

}  // namespace dtrain::topology
