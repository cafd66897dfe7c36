// SPDX-License-Identifier: Apache-2.0
#pragma once
// Whether this node reaches its peers' data-fabric addresses: ICMP echo over raw sockets, for the
// node check a job's epilog runs as root. An I/O edge; judging the outcomes is for the caller.

#include <chrono>
#include <string>
#include <vector>

namespace dtrain::core {

// One peer's outcome.
struct PeerReachability {
  std::string address;  // numeric IPv4 or IPv6 address as given
  bool reachable = false;
  std::string detail;  // "" when reachable; else e.g. "no echo reply within 1500 ms",
                       // "sendto: Network is unreachable"
};

// Sends ICMP (IPv4) / ICMPv6 echo requests to every address at once (up to 3 tries each, spaced
// across the budget) and waits for the replies, never longer than `budget` in total, whatever the
// number of addresses. The outcomes come in the order of `addresses`, one for each (duplicates
// included); an address that is not numeric is unreachable with a detail saying so.
// Needs CAP_NET_RAW (a raw socket; the epilog runs as root). Throws dtrain::Error
// (ErrorKind::kResource) when no raw socket can be opened, naming the reason and that it needs
// root. A kernel without IPv6 is no such failure: its IPv6 peers are unreachable, with the reason.
std::vector<PeerReachability> probe_echo(const std::vector<std::string>& addresses,
                                         std::chrono::milliseconds budget);

}  // namespace dtrain::core
