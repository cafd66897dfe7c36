// SPDX-License-Identifier: Apache-2.0
#include "plan/plan_report.hpp"

#include <algorithm>
#include <iomanip>

namespace dtrain::plan {
namespace {

// What the plugin exports for a memory file: the descriptor exists only in the running task and
// the processes it starts.
constexpr const char* kMemoryFilePath = "/proc/self/fd/<n>";

}  // namespace

void print_rank_table(std::ostream& out, const core::StepPlan& plan) {
  const auto& layout = plan.layout;
  std::size_t host_width = 4;
  for (const auto& h : layout.hosts) host_width = std::max(host_width, h.size());
  out << "# step: " << layout.world_size() << " ranks on " << layout.node_count()
      << " nodes; master " << plan.master_addr << ":" << plan.ports.master << " ("
      << (plan.ports.source == core::PortSource::kReserved ? "Slurm reserved ports"
                                                           : "derived ports")
      << ")\n";
  out << std::left << std::setw(8) << "rank" << std::setw(6) << "node"
      << std::setw(static_cast<int>(host_width) + 2) << "host" << std::setw(7) << "local"
      << "endpoint\n";
  for (std::uint32_t r = 0; r < layout.world_size(); ++r) {
    const auto& p = layout.ranks[r];
    out << std::left << std::setw(8) << r << std::setw(6) << p.node
        << std::setw(static_cast<int>(host_width) + 2) << layout.hosts[p.node] << std::setw(7)
        << p.local_rank << core::endpoint_of(plan, r) << "\n";
  }
}

void print_task_env(std::ostream& out, std::uint32_t rank, const std::vector<core::EnvVar>& env) {
  out << "# environment of rank " << rank << "\n";
  for (const auto& var : env) {
    if (var.value_in_memory_file) {
      out << var.name << "=" << kMemoryFilePath << "   # a memory file of the task holding "
          << var.value.size() << " bytes (" << var.name.substr(0, var.name.size() - 5)
          << " is too long for execve)";
    } else {
      out << var.name << "=" << var.value;
    }
    if (var.keep_user_value) out << "   # unless the user set it";
    out << "\n";
  }
}

nlohmann::json rank_table_json(const core::StepPlan& plan) {
  const auto& layout = plan.layout;
  nlohmann::json ranks = nlohmann::json::array();
  for (std::uint32_t r = 0; r < layout.world_size(); ++r) {
    const auto& p = layout.ranks[r];
    ranks.push_back({{"rank", r},
                     {"node", p.node},
                     {"host", layout.hosts[p.node]},
                     {"local_rank", p.local_rank},
                     {"endpoint", core::endpoint_of(plan, r)}});
  }
  nlohmann::json nodes = nlohmann::json::array();
  for (std::uint32_t n = 0; n < layout.node_count(); ++n) {
    nodes.push_back({{"node_rank", n},
                     {"host", layout.hosts[n]},
                     {"address", plan.node_addresses[n]},
                     {"ranks", layout.node_ranks[n]}});
  }
  return {
      {"world_size", layout.world_size()},
      {"nnodes", layout.node_count()},
      {"master_addr", plan.master_addr},
      {"master_port", plan.ports.master},
      {"port_source", plan.ports.source == core::PortSource::kReserved ? "reserved" : "derived"},
      {"endpoints", plan.endpoints},
      {"ranks", std::move(ranks)},
      {"nodes", std::move(nodes)},
      {"warnings", plan.step_warnings}};
}

nlohmann::json env_json(const std::vector<core::EnvVar>& env) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& var : env) {
    if (var.value_in_memory_file) {
      out[var.name] = {{"memory_file", kMemoryFilePath}, {"content", var.value}};
    } else {
      out[var.name] = var.value;
    }
  }
  return out;
}

}  // namespace dtrain::plan
