// SPDX-License-Identifier: Apache-2.0
#include "topology/pci_address.hpp"

#include <charconv>
#include <cstdio>

#include "core/error.hpp"
#include "core/parse.hpp"

namespace dtrain::topology {
namespace {

[[noreturn]] void throw_bad_bus_id(std::string_view text, std::string_view what) {
  throw_invalid(std::string(what) + ": " + core::quote_for_error(text) +
                " is not a PCI bus id; expected domain:bus:device.function in hex, for "
                "example 0000:1b:00.0");
}

std::uint32_t parse_hex_field(std::string_view field, std::size_t max_digits, std::uint32_t max,
                              std::string_view text, std::string_view what) {
  std::uint32_t value = 0;
  const char* last = field.data() + field.size();
  auto [ptr, ec] = std::from_chars(field.data(), last, value, 16);
  if (field.empty() || field.size() > max_digits || ec != std::errc() || ptr != last ||
      value > max) {
    throw_bad_bus_id(text, what);
  }
  return value;
}

}  // namespace

PciAddress parse_pci_address(std::string_view text, std::string_view what) {
  const auto colon_parts = core::split(text, ':');
  if (colon_parts.size() < 2 || colon_parts.size() > 3) {
    throw_bad_bus_id(text, what);
  }
  PciAddress address;
  std::size_t next = 0;
  if (colon_parts.size() == 3)
    address.domain = parse_hex_field(colon_parts[next++], 8, 0xffffffffu, text, what);
  address.bus = parse_hex_field(colon_parts[next++], 2, 0xff, text, what);
  const auto dev_fn = core::split(colon_parts[next], '.');
  if (dev_fn.size() != 2) throw_bad_bus_id(text, what);
  address.device = parse_hex_field(dev_fn[0], 2, 0x1f, text, what);
  address.function = parse_hex_field(dev_fn[1], 1, 7, text, what);
  return address;
}

std::string to_string(const PciAddress& address) {
  char text[32];
  std::snprintf(text, sizeof text, "%04x:%02x:%02x.%x", address.domain, address.bus, address.device,
                address.function);
  return text;
}

std::string normalize_bus_id(std::string_view text, std::string_view what) {
  return to_string(parse_pci_address(text, what));
}

bool pci_order_less(std::string_view a, std::string_view b) {
  return parse_pci_address(a, "PCI bus id") < parse_pci_address(b, "PCI bus id");
}

}  // namespace dtrain::topology
