#pragma once
// The two pieces of network I/O the plugin needs: name resolution and a check that a
// port can still be bound. Kept apart from the pure planning code.

#include <cstdint>
#include <string>

namespace dtrain::core {

// Resolves `host` with getaddrinfo, preferring IPv4. Throws dtrain::Error(kInvalidInput)
// naming the host and the resolver's reason when it cannot be resolved.
std::string resolve_host(const std::string& host);

// The first line of `hosts_file` that names `host` (comments and surrounding blanks removed), or
// "" when none does or the file cannot be read.
std::string hosts_line(const std::string& host, const std::string& hosts_file = "/etc/hosts");

// True when a listening socket already holds addr:port on this machine.
bool port_in_use(const std::string& addr, std::uint16_t port);

}  // namespace dtrain::core
