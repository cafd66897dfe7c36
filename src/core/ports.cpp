#include "core/ports.hpp"

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
    for (auto p = first; p <= last; ++p) ports.push_back(static_cast<std::uint16_t>(p));
  }
  return ports;
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
  const std::uint32_t blocks_in_range = range.size() / port_block;
  const std::uint32_t blocks_needed = (needed + port_block - 1) / port_block;
  if (blocks_needed > blocks_in_range) {
    throw_invalid("the step needs " + std::to_string(needed) + " ports per node but the port range " +
                  std::to_string(range.first) + "-" + std::to_string(range.last) +
                  " holds only " + std::to_string(blocks_in_range * port_block) +
                  " usable ones; widen ports= in plugstack.conf");
  }
  const std::uint32_t starts = blocks_in_range - blocks_needed + 1;
  const std::uint64_t slot = (4ull * job_id + (step_id % 4u)) % starts;
  const std::uint32_t base = range.first + static_cast<std::uint32_t>(slot) * port_block;
  plan.endpoint_ports.resize(max_local_tasks);
  for (std::uint32_t l = 0; l < max_local_tasks; ++l) {
    plan.endpoint_ports[l] = static_cast<std::uint16_t>(base + l);
  }
  plan.master = static_cast<std::uint16_t>(base + max_local_tasks);
  return plan;
}

}  // namespace dtrain::core
