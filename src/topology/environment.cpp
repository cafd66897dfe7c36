// SPDX-License-Identifier: Apache-2.0
#include "topology/environment.hpp"

namespace dtrain::topology {
namespace {

void append(std::string& list, const std::string& item) {
  if (!list.empty()) list += ',';
  list += item;
}

// ":port" only when the port is known.
std::string with_port(const std::string& hca, unsigned port) {
  return port == 0 ? hca : hca + ":" + std::to_string(port);
}

}  // namespace

std::vector<EnvVar> binding_environment(const TaskBinding& task) {
  std::vector<EnvVar> env;
  if (!task.gpu_bus_ids.empty()) {
    env.emplace_back("CUDA_VISIBLE_DEVICES", task.cuda_visible_devices);
    env.emplace_back("CUDA_DEVICE_ORDER", "PCI_BUS_ID");
  }
  std::string fabric_hcas;
  for (const NicChoice& nic : task.node_nics) {
    if (!nic.hca.empty()) append(fabric_hcas, with_port(nic.hca, nic.port));
  }
  std::string ucx;
  std::string netdevs;
  std::string own;
  for (const NicChoice& nic : task.nics) {
    if (!nic.hca.empty() && nic.port != 0) append(ucx, with_port(nic.hca, nic.port));
    if (!nic.netdev.empty()) append(netdevs, nic.netdev);
    append(own, nic.hca.empty() ? nic.netdev : with_port(nic.hca, nic.port));
  }
  if (!fabric_hcas.empty()) env.emplace_back("NCCL_IB_HCA", "=" + fabric_hcas);
  if (!ucx.empty()) env.emplace_back("UCX_NET_DEVICES", ucx);
  if (!netdevs.empty()) env.emplace_back("NCCL_SOCKET_IFNAME", "=" + netdevs);
  if (!own.empty()) env.emplace_back("DTRAIN_NIC", own);
  if (!task.cpus.empty()) {
    env.emplace_back("OMP_NUM_THREADS", std::to_string(task.cores));
    env.emplace_back("DTRAIN_CPU_LIST", format_cpu_list(task.cpus));
  }
  if (!task.gpu_bus_ids.empty()) {
    std::string bus_ids;
    for (const std::string& bus_id : task.gpu_bus_ids) append(bus_ids, bus_id);
    env.emplace_back("DTRAIN_GPU_BUS_IDS", bus_ids);
    if (!task.device_indices.empty()) {
      env.emplace_back("DTRAIN_CUDA_DEVICE", std::to_string(task.device_indices.front()));
    }
  }
  return env;
}

}  // namespace dtrain::topology
