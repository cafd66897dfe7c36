// SPDX-License-Identifier: Apache-2.0
#include "topology/pci_io.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <array>

#include "core/error.hpp"
#include "topology/pci_address.hpp"

namespace dtrain::topology {

std::optional<std::uint16_t> pci_config_vendor(const std::string& bus_id,
                                               const std::string& devices_dir) {
  try {
    if (normalize_bus_id(bus_id, "PCI bus id") != bus_id) return std::nullopt;
  } catch (const Error&) {
    return std::nullopt;
  }
  const std::string path = devices_dir + "/" + bus_id + "/config";
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return std::nullopt;
  std::array<unsigned char, 2> bytes{};
  const ssize_t n = pread(fd, bytes.data(), bytes.size(), 0);
  close(fd);
  if (n != static_cast<ssize_t>(bytes.size())) return std::nullopt;
  // Configuration space is little-endian (PCI Local Bus Specification, 6.1).
  return static_cast<std::uint16_t>(bytes[0] | (bytes[1] << 8));
}

}  // namespace dtrain::topology
