#pragma once
// Port planning. Endpoint port of a rank = endpoint_ports[local rank]; the master port is
// outside that set. Identical on every node of a step, since it depends only on step-wide data.
//
// Derived scheme (when Slurm reserved no ports), with R = range size and B = port_block, the
// most ports a step may use on one node (its busiest node's tasks + the master):
//   stride S = floor(R / B), job classes D = floor(S / 64)
//   colour c = (job_id mod D) * 64 + (step_id mod 64)
//   port of local rank l = first + l * S + c;  master = first + max_local * S + c
// A step's ports are exactly the ports of colour c in rows 0..max_local, so two steps whose
// colours differ never share a port, whatever their task counts: the 64 steps of a job with ids
// differing by less than 64, and the steps of jobs whose ids differ by 1..D-1. The interleaving
// (rather than contiguous blocks) is what makes this independent of each step's task count.

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

// The number of consecutive job ids whose derived ports never collide (D above); config
// validation guarantees it is at least 1.
std::uint32_t derived_port_job_classes(const PortRange& range, std::uint32_t port_block);

inline constexpr std::uint32_t kDerivedPortStepClasses = 64;

StepPorts plan_ports(const PortRange& range, std::uint32_t port_block, std::uint32_t job_id,
                     std::uint32_t step_id, std::uint32_t max_local_tasks,
                     std::string_view reserved_ports);

}  // namespace dtrain::core
