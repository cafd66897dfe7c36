// SPDX-License-Identifier: Apache-2.0
#include "core/ports.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "core/parse.hpp"

namespace dtrain::core {

std::vector<std::uint16_t> parse_port_list(std::string_view text) {
  require_length(text, "SLURM_STEP_RESV_PORTS", 4096);
  std::vector<std::uint16_t> ports;
  for (auto item : split(text, ',')) {
    const auto dash = item.find('-');
    const auto first = parse_unsigned(item.substr(0, dash), "SLURM_STEP_RESV_PORTS", 1, 65535);
    auto last = first;
    if (dash != std::string_view::npos) {
      last = parse_unsigned(item.substr(dash + 1), "SLURM_STEP_RESV_PORTS", first, 65535);
    }
    // A port appears once in a real reservation; more entries than ports exist is not one.
    if (ports.size() + (last - first + 1) > 65535) {
      throw_invalid("SLURM_STEP_RESV_PORTS " + quote_for_error(text) +
                    " lists more ports than exist");
    }
    for (auto p = first; p <= last; ++p) ports.push_back(static_cast<std::uint16_t>(p));
  }
  return ports;
}

std::uint32_t derived_port_colours(const PortRange& range, std::uint32_t port_block) {
  const std::uint32_t width = port_block == 0 ? 0 : range.size() / port_block;
  if (width < kDerivedPortMinRowWidth) return 0;
  return width % 2 == 1 ? width : width - 1;  // odd, so coprime to kDerivedPortStepClasses
}

std::uint32_t derived_port_job_classes(const PortRange& range, std::uint32_t port_block) {
  const std::uint32_t colours = derived_port_colours(range, port_block);
  if (colours == 0) return 0;
  return std::max<std::uint32_t>(1, colours / kDerivedPortStepClasses);
}

std::uint32_t derived_port_colour(std::uint32_t colours, std::uint32_t job_id,
                                  std::uint32_t step_id) {
  // 64 * job_id needs 38 bits: computed in 64 bits, so the colour follows the exact integers.
  return static_cast<std::uint32_t>((std::uint64_t{kDerivedPortStepClasses} * job_id + step_id) %
                                    colours);
}

std::string frameworks_binding(const FrameworkSet& exported, StepPortKind kind) {
  std::vector<std::string> names;
  if (kind == StepPortKind::kMaster) {
    if (exported.torch) names.emplace_back("PyTorch's TCPStore (MASTER_PORT)");
    if (exported.paddle) names.emplace_back("PaddlePaddle's TCPStore (PADDLE_MASTER)");
    if (exported.jax) names.emplace_back("JAX's coordinator (JAX_COORDINATOR_ADDRESS)");
  } else {
    if (exported.tf) names.emplace_back("TensorFlow's worker server (TF_CONFIG)");
    if (exported.paddle) names.emplace_back("PaddlePaddle's trainer (PADDLE_CURRENT_ENDPOINT)");
  }
  std::string text;
  for (std::size_t i = 0; i < names.size(); ++i) {
    text += (i == 0 ? "" : " and ") + names[i];
  }
  return text;
}

StepPorts plan_ports(const PortRange& range, std::uint32_t port_block, std::uint32_t job_id,
                     std::uint32_t step_id, std::uint32_t max_local_tasks,
                     std::string_view reserved_ports) {
  StepPorts plan;
  const std::uint32_t needed = max_local_tasks + 1;
  if (!reserved_ports.empty()) {
    const auto reserved = parse_port_list(reserved_ports);
    if (reserved.size() >= needed) {
      plan.source = PortSource::kReserved;
      plan.endpoint_ports.assign(reserved.begin(), reserved.begin() + max_local_tasks);
      plan.master = reserved[max_local_tasks];
      return plan;
    }
    plan.note = "Slurm reserved " + std::to_string(reserved.size()) + " ports (" +
                std::string(reserved_ports) + ") but this step needs " + std::to_string(needed) +
                " per node (one per local task plus the master); using derived ports. Fix: srun "
                "--resv-ports=" +
                std::to_string(needed);
  }
  if (needed > port_block) {
    throw_invalid(
        "the step has " + std::to_string(max_local_tasks) +
        " tasks on its busiest node, so it needs " + std::to_string(needed) +
        " ports per node, but derived ports give a step at most port_block=" +
        std::to_string(port_block) +
        "; let Slurm reserve them (MpiParams=ports=A-B in slurm.conf, srun --resv-ports=" +
        std::to_string(needed) + ") or raise port_block= in plugstack.conf");
  }
  const std::uint32_t colours = derived_port_colours(range, port_block);
  if (colours == 0) {
    throw_invalid("port range " + std::to_string(range.first) + "-" + std::to_string(range.last) +
                  " is too small for port_block=" + std::to_string(port_block) +
                  "; it needs at least " + std::to_string(kDerivedPortMinRowWidth * port_block) +
                  " ports");
  }
  const std::uint32_t stride = range.size() / port_block;
  const std::uint32_t colour = derived_port_colour(colours, job_id, step_id);
  const auto port_of_row = [&](std::uint32_t row) {
    return static_cast<std::uint16_t>(range.first + row * stride + colour);
  };
  plan.endpoint_ports.resize(max_local_tasks);
  for (std::uint32_t l = 0; l < max_local_tasks; ++l) plan.endpoint_ports[l] = port_of_row(l);
  plan.master = port_of_row(max_local_tasks);
  return plan;
}

}  // namespace dtrain::core
