// SPDX-License-Identifier: Apache-2.0
#pragma once
// The two pieces of network I/O the plugin needs: name resolution and a check that a
// port can still be bound. Kept apart from the pure planning code.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace dtrain::core {

// Resolves `host` with getaddrinfo, preferring IPv4. Throws dtrain::Error(kInvalidInput)
// naming the host and the resolver's reason when it cannot be resolved.
std::string resolve_host(const std::string& host);

// This machine's host name (gethostname: the UTS namespace's). Throws dtrain::Error when the
// kernel refuses.
std::string local_host_name();

// The first line of `hosts_file` that names `host` (comments and surrounding blanks removed), or
// "" when none does or the file cannot be read.
std::string hosts_line(const std::string& host, const std::string& hosts_file = "/etc/hosts");

// The uid of a listening TCP socket on addr:port (or on the wildcard address and that port) in
// the kernel's table text (the format of /proc/net/tcp and /proc/net/tcp6); nothing when none
// listens there. Pure.
std::optional<std::uint32_t> listener_uid_in(std::string_view table, const std::string& addr,
                                             std::uint16_t port);

// listener_uid_in over this network namespace's /proc/net/tcp and /proc/net/tcp6.
std::optional<std::uint32_t> listener_uid(const std::string& addr, std::uint16_t port);

// True when a listening socket already holds addr:port on this machine.
bool port_in_use(const std::string& addr, std::uint16_t port);

// The interface of this network namespace that holds the numeric address `address` (getifaddrs),
// or nothing. Only names of at most 15 characters from [A-Za-z0-9._:-] are returned.
std::optional<std::string> interface_with_address(const std::string& address);

// The link state of interface `name` from /sys/class/net/NAME: its carrier (1 or 0; nothing when
// the kernel refuses to say, as it does for an interface that is administratively down) and its
// operstate ("" when unreadable). `name` must come from interface_with_address.
struct LinkState {
  std::optional<int> carrier;
  std::string operstate;
};
LinkState link_state(const std::string& name);

}  // namespace dtrain::core
