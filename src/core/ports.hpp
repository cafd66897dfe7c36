#pragma once
// Port planning. Endpoint port of a rank = endpoint_ports[local rank]; the master port is
// outside that set. Identical on every node of a step, since it depends only on step-wide data.
//
// Derived scheme (when Slurm reserved no ports), with R = range size, B = port_block and
// k = ceil((max_local + 1) / B) blocks needed:
//   slot = (4 * job_id + (step_id mod 4)) mod (floor(R / B) - k + 1)
//   base = first + slot * B;  endpoint port(l) = base + l;  master = base + max_local
// Concurrent jobs whose ids differ by less than (floor(R/B) - k + 1) / 4 never share a port
// for their first four steps.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/config.hpp"

namespace dtrain::core {

enum class PortSource { kReserved, kDerived };

struct StepPorts {
  std::vector<std::uint16_t> endpoint_ports;  // index: local rank
  std::uint16_t master = 0;
  PortSource source = PortSource::kDerived;
  std::string note;  // why reserved ports were not used, when they were present
};

// Parses SLURM_STEP_RESV_PORTS ("12000-12007" or "12000,12002-12004") into a port list.
std::vector<std::uint16_t> parse_port_list(std::string_view text);

StepPorts plan_ports(const PortRange& range, std::uint32_t port_block, std::uint32_t job_id,
                     std::uint32_t step_id, std::uint32_t max_local_tasks,
                     std::string_view reserved_ports);

}  // namespace dtrain::core
