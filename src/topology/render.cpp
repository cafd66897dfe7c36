// SPDX-License-Identifier: Apache-2.0
#include "topology/render.hpp"

#include <algorithm>

#include "topology/closeness.hpp"
#include "topology/environment.hpp"

namespace dtrain::topology {
namespace {

using Row = std::vector<std::string>;

std::string format_columns(const std::vector<Row>& rows) {
  std::vector<std::size_t> width;
  for (const Row& row : rows) {
    if (width.size() < row.size()) width.resize(row.size(), 0);
    for (std::size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  std::string text;
  for (const Row& row : rows) {
    std::string line;
    for (std::size_t c = 0; c < row.size(); ++c) {
      line += row[c];
      if (c + 1 < row.size()) line += std::string(width[c] - row[c].size() + 2, ' ');
    }
    text += line + '\n';
  }
  return text;
}

std::string join_numbers(const std::vector<unsigned>& numbers) {
  std::string text;
  for (unsigned n : numbers) {
    if (!text.empty()) text += ',';
    text += std::to_string(n);
  }
  return text;
}

std::string join(const std::vector<std::string>& items) {
  std::string text;
  for (const auto& item : items) text += (text.empty() ? "" : ",") + item;
  return text;
}

std::string nic_label(const std::string& hca, const std::string& netdev) {
  if (hca.empty()) return netdev;
  return netdev.empty() ? hca : hca + "/" + netdev;
}

std::string or_dash(const std::string& text) {
  return text.empty() ? "-" : text;
}

}  // namespace

std::string render_binding_table(const BindingPlan& plan) {
  std::vector<Row> rows{
      {"task", "GPU bus id", "CUDA_VISIBLE_DEVICES", "NIC (class)", "CPUs", "cores", "NUMA"}};
  for (const TaskBinding& task : plan.tasks) {
    std::vector<std::string> nics;
    for (const NicChoice& nic : task.nics) {
      nics.push_back(nic_label(nic.hca, nic.netdev) + " " + closeness_name(nic.closeness));
    }
    rows.push_back({std::to_string(task.local_rank), or_dash(join(task.gpu_bus_ids)),
                    or_dash(task.cuda_visible_devices), or_dash(join(nics)),
                    or_dash(format_cpu_list(task.cpus)), std::to_string(task.cores),
                    or_dash(join_numbers(task.numa_nodes))});
  }
  std::string text = format_columns(rows);
  for (const std::string& warning : plan.warnings) text += "warning: " + warning + '\n';
  if (!plan.tasks.empty() && !plan.tasks[0].node_nics.empty()) {
    std::vector<std::string> fabric;
    for (const NicChoice& nic : plan.tasks[0].node_nics)
      fabric.push_back(nic_label(nic.hca, nic.netdev));
    text += "node fabric NICs (NCCL_IB_HCA of every GPU task): " + join(fabric) + '\n';
  }
  return text;
}

std::string render_closeness_matrix(const NodeTopology& topology) {
  Row header{""};
  for (std::size_t n = 0; n < topology.nics.size(); ++n)
    header.push_back("NIC" + std::to_string(n));
  header.push_back("CPU Affinity");
  header.push_back("NUMA Affinity");
  std::vector<Row> rows{header};
  for (std::size_t g = 0; g < topology.gpus.size(); ++g) {
    const Gpu& gpu = topology.gpus[g];
    Row row{"GPU" + std::to_string(g)};
    for (const Nic& nic : topology.nics)
      row.push_back(closeness_name(classify(gpu.placement, nic.placement)));
    row.push_back(or_dash(format_cpu_list(gpu.placement.locality.cpus)));
    row.push_back(or_dash(join_numbers(gpu.placement.locality.numa_nodes)));
    rows.push_back(std::move(row));
  }
  std::string text = format_columns(rows);
  text += "\nGPU Legend (PCI order; CUDA_DEVICE_ORDER=PCI_BUS_ID numbering):\n";
  for (std::size_t g = 0; g < topology.gpus.size(); ++g) {
    const Gpu& gpu = topology.gpus[g];
    std::string names = gpu.cuda_name;
    if (!gpu.nvml_name.empty()) names += (names.empty() ? "" : ",") + gpu.nvml_name;
    text += "  GPU" + std::to_string(g) + ": " + gpu.bus_id + (names.empty() ? "" : " " + names) +
            (gpu.model.empty() ? "" : " (" + gpu.model + ")") + '\n';
  }
  text += "\nNIC Legend:\n";
  for (std::size_t n = 0; n < topology.nics.size(); ++n) {
    const Nic& nic = topology.nics[n];
    text += "  NIC" + std::to_string(n) + ": " + nic_label(nic.hca, nic.netdev) + " " + nic.bus_id +
            '\n';
  }
  text +=
      "\nLegend:\n"
      "  PIX  = at most one PCIe switch between them\n"
      "  PXB  = several PCIe switches, no host bridge\n"
      "  PHB  = through a PCIe host bridge (the CPU)\n"
      "  NODE = across PCIe host bridges within a NUMA node\n"
      "  SYS  = across NUMA nodes or sockets\n";
  return text;
}

nlohmann::json binding_to_json(const NodeTopology& topology, const BindingPlan& plan) {
  nlohmann::json gpus = nlohmann::json::array();
  for (const Gpu& gpu : topology.gpus) {
    nlohmann::json nic_classes = nlohmann::json::array();
    for (const Nic& nic : topology.nics)
      nic_classes.push_back(closeness_name(classify(gpu.placement, nic.placement)));
    gpus.push_back({{"bus_id", gpu.bus_id},
                    {"cuda", gpu.cuda_name},
                    {"nvml", gpu.nvml_name},
                    {"model", gpu.model},
                    {"cpus", format_cpu_list(gpu.placement.locality.cpus)},
                    {"numa_nodes", gpu.placement.locality.numa_nodes},
                    {"nic_closeness", nic_classes}});
  }
  nlohmann::json nics = nlohmann::json::array();
  for (const Nic& nic : topology.nics) {
    nics.push_back({{"bus_id", nic.bus_id},
                    {"hca", nic.hca},
                    {"netdev", nic.netdev},
                    {"port", nic.port},
                    {"numa_nodes", nic.placement.locality.numa_nodes}});
  }
  nlohmann::json tasks = nlohmann::json::array();
  for (const TaskBinding& task : plan.tasks) {
    nlohmann::json task_nics = nlohmann::json::array();
    for (const NicChoice& nic : task.nics) {
      task_nics.push_back({{"bus_id", nic.bus_id},
                           {"hca", nic.hca},
                           {"netdev", nic.netdev},
                           {"port", nic.port},
                           {"closeness", closeness_name(nic.closeness)}});
    }
    nlohmann::json env = nlohmann::json::object();
    for (const auto& [name, value] : binding_environment(task)) env[name] = value;
    tasks.push_back({{"local_rank", task.local_rank},
                     {"gpu_bus_ids", task.gpu_bus_ids},
                     {"cuda_visible_devices", task.cuda_visible_devices},
                     {"nics", task_nics},
                     {"cpus", format_cpu_list(task.cpus)},
                     {"cores", task.cores},
                     {"numa_nodes", task.numa_nodes},
                     {"environment", env}});
  }
  return {{"source", topology.source},
          {"has_io", topology.has_io},
          {"gpus", gpus},
          {"nics", nics},
          {"tasks", tasks},
          {"warnings", plan.warnings}};
}

}  // namespace dtrain::topology
