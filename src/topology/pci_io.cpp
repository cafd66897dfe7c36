// SPDX-License-Identifier: Apache-2.0
#include "topology/pci_io.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>

#include "core/error.hpp"
#include "topology/pci_address.hpp"

namespace dtrain::topology {

std::optional<std::uint16_t> pci_config_vendor(const std::string& bus_id,
                                               const std::string& devices_dir) {
  if (normalize_bus_id(bus_id, "PCI bus id") != bus_id) {
    throw Error(ErrorKind::kInvalidInput, "'" + bus_id + "' is not a canonical PCI bus id");
  }
  const std::string path = devices_dir + "/" + bus_id + "/config";
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0 && errno == ENOENT) return std::nullopt;
  if (fd < 0)
    throw Error(ErrorKind::kResource, "cannot open " + path + ": " + std::strerror(errno));
  std::array<unsigned char, 2> bytes{};
  const ssize_t n = pread(fd, bytes.data(), bytes.size(), 0);
  const int error = errno;
  close(fd);
  if (n != static_cast<ssize_t>(bytes.size())) {
    throw Error(ErrorKind::kResource,
                "cannot read " + path + ": " + (n < 0 ? std::strerror(error) : "short read"));
  }
  // Configuration space is little-endian (PCI Local Bus Specification, 6.1).
  return static_cast<std::uint16_t>(bytes[0] | (bytes[1] << 8));
}

}  // namespace dtrain::topology
