// SPDX-License-Identifier: Apache-2.0
#pragma once
// Whether a PCI function still answers on its bus, from sysfs: for the epilog's GPU check
// (core/node_check.hpp). An I/O edge.

#include <cstdint>
#include <optional>
#include <string>

namespace dtrain::topology {

inline constexpr const char* kPciDevicesDir = "/sys/bus/pci/devices";

// The vendor ID in the first two bytes of the function's configuration space
// (DEVICES_DIR/BUS_ID/config, read as it is now, not the kernel's copy from enumeration): 0xffff
// when the device no longer answers ("fallen off the bus"). Nothing when the function is gone
// from sysfs (ENOENT). Throws dtrain::Error when `bus_id` is not a canonical PCI bus id
// (topology/pci_address.hpp) or the file cannot be read for another reason: no evidence either
// way, which the caller must not take for a missing device.
std::optional<std::uint16_t> pci_config_vendor(const std::string& bus_id,
                                               const std::string& devices_dir = kPciDevicesDir);

}  // namespace dtrain::topology
