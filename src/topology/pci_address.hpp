// SPDX-License-Identifier: Apache-2.0
#pragma once
// PCI addresses (domain:bus:device.function). GPUs and NICs are keyed by their canonical
// text form, lowercase with a 4-digit domain (0000:1b:00.0), never by an index.

#include <compare>
#include <cstdint>
#include <string>
#include <string_view>

namespace dtrain::topology {

struct PciAddress {
  std::uint32_t domain = 0;
  std::uint32_t bus = 0;
  std::uint32_t device = 0;
  std::uint32_t function = 0;
  auto operator<=>(const PciAddress&) const = default;
};

// Accepts "[domain:]bus:device.function" in hex, any case, with a domain of up to 8 digits as
// nvidia-smi prints it (00000000:1B:00.0). Throws kInvalidInput naming `what` otherwise.
PciAddress parse_pci_address(std::string_view text, std::string_view what);

std::string to_string(const PciAddress& address);

// parse + to_string: the canonical key for a bus id given by a user, Slurm or NVML.
std::string normalize_bus_id(std::string_view text, std::string_view what);

// Orders canonical bus ids numerically (a 5-digit domain sorts after 0000).
bool pci_order_less(std::string_view a, std::string_view b);

}  // namespace dtrain::topology
