// SPDX-License-Identifier: Apache-2.0
#include "core/reachability_io.hpp"

#include <arpa/inet.h>
#include <linux/icmp.h>
#include <netinet/icmp6.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <system_error>

#include "core/error.hpp"

namespace dtrain::core {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kTries = 3;
constexpr unsigned char kEchoRequest4 = 8;  // RFC 792
constexpr unsigned char kEchoReply4 = 0;
constexpr std::size_t kHeader = 8;  // type, code, checksum, identifier, sequence
constexpr std::size_t kToken = 8;   // the payload: this call's random token, echoed back
constexpr std::size_t kMaxIpv4Header = 60;

struct Peer {
  int family = AF_UNSPEC;  // AF_UNSPEC: nothing to send (not numeric, or no socket for it)
  sockaddr_storage to{};
  socklen_t to_len = 0;
  int sent = 0;            // tries made
  bool in_flight = false;  // at least one request left this node
  std::string send_error;
};

struct Socket {
  int fd = -1;
  Socket() = default;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  ~Socket() {
    if (fd >= 0) ::close(fd);
  }
};

std::string error_text(int error) {
  return std::system_category().message(error);
}

std::uint64_t random_bits() {
  std::uint64_t value = 0;
  if (getrandom(&value, sizeof value, GRND_NONBLOCK) == static_cast<ssize_t>(sizeof value)) {
    return value;
  }
  // Early boot without entropy yet: the pid and the clock still keep concurrent probes apart.
  return (static_cast<std::uint64_t>(getpid()) << 32) ^
         static_cast<std::uint64_t>(Clock::now().time_since_epoch().count());
}

void put16(unsigned char* at, unsigned value) {
  at[0] = static_cast<unsigned char>(value >> 8);
  at[1] = static_cast<unsigned char>(value);
}
unsigned get16(const unsigned char* at) {
  return (unsigned{at[0]} << 8) | at[1];
}

// RFC 1071. Only IPv4 needs it from us: raw ICMPv6 sockets have the kernel fill it (RFC 3542 3.1).
unsigned checksum(const unsigned char* data, std::size_t len) {
  std::uint32_t sum = 0;
  for (std::size_t i = 0; i + 1 < len; i += 2) sum += get16(data + i);
  if (len % 2 != 0) sum += unsigned{data[len - 1]} << 8;
  while (sum >> 16 != 0) sum = (sum & 0xffff) + (sum >> 16);
  return ~sum & 0xffff;
}

Peer parse(const std::string& address) {
  Peer peer;
  sockaddr_in v4{};
  sockaddr_in6 v6{};
  if (address.find('\0') != std::string::npos) return peer;  // inet_pton would stop there
  if (inet_pton(AF_INET, address.c_str(), &v4.sin_addr) == 1) {
    v4.sin_family = AF_INET;
    std::memcpy(&peer.to, &v4, sizeof v4);
    peer.to_len = sizeof v4;
    peer.family = AF_INET;
  } else if (inet_pton(AF_INET6, address.c_str(), &v6.sin6_addr) == 1) {
    v6.sin6_family = AF_INET6;
    std::memcpy(&peer.to, &v6, sizeof v6);
    peer.to_len = sizeof v6;
    peer.family = AF_INET6;
  }
  return peer;
}

bool same_source(const Peer& peer, const sockaddr_storage& from, socklen_t from_len) {
  if (from.ss_family != peer.family || from_len != peer.to_len) return false;
  if (peer.family == AF_INET) {
    sockaddr_in a{}, b{};
    std::memcpy(&a, &from, sizeof a);
    std::memcpy(&b, &peer.to, sizeof b);
    return a.sin_addr.s_addr == b.sin_addr.s_addr;
  }
  sockaddr_in6 a{}, b{};
  std::memcpy(&a, &from, sizeof a);
  std::memcpy(&b, &peer.to, sizeof b);
  return std::memcmp(&a.sin6_addr, &b.sin6_addr, sizeof a.sin6_addr) == 0;
}

struct Probe {
  std::vector<Peer> peers;
  std::vector<PeerReachability> out;
  unsigned id = 0;        // ICMP identifier: tells our replies from other pingers'
  unsigned seq_base = 0;  // peer i is asked with sequence seq_base + i (mod 2^16)
  std::array<unsigned char, kToken> token{};

  bool waiting() const {
    for (std::size_t i = 0; i < peers.size(); ++i) {
      const Peer& p = peers[i];
      if (p.family != AF_UNSPEC && !out[i].reachable && (p.sent < kTries || p.in_flight)) {
        return true;
      }
    }
    return false;
  }

  void send_round(int fd4, int fd6) {
    for (std::size_t i = 0; i < peers.size(); ++i) {
      Peer& peer = peers[i];
      if (peer.family == AF_UNSPEC || out[i].reachable || peer.sent == kTries) continue;
      ++peer.sent;
      std::array<unsigned char, kHeader + kToken> packet{};
      packet[0] = peer.family == AF_INET ? kEchoRequest4 : ICMP6_ECHO_REQUEST;
      put16(&packet[4], id);
      put16(&packet[6], (seq_base + i) & 0xffff);
      std::memcpy(&packet[kHeader], token.data(), kToken);
      if (peer.family == AF_INET) put16(&packet[2], checksum(packet.data(), packet.size()));
      if (sendto(peer.family == AF_INET ? fd4 : fd6, packet.data(), packet.size(), 0,
                 reinterpret_cast<const sockaddr*>(&peer.to), peer.to_len) >= 0) {
        peer.in_flight = true;
        peer.send_error.clear();  // an earlier try's EAGAIN says nothing about the peer
      } else {
        peer.send_error = "sendto: " + error_text(errno);
      }
    }
  }

  // Every datagram is the network's (any ICMP host can send us anything): lengths first, and only
  // an echo reply carrying our identifier, a sequence we sent and our token, from the very address
  // asked, counts. Bounded, so that a flood cannot hold the loop past its deadline.
  void drain(int fd, int family) {
    for (int n = 0; n < 256; ++n) {
      std::array<unsigned char, kMaxIpv4Header + kHeader + kToken> buffer{};
      sockaddr_storage from{};
      socklen_t from_len = sizeof from;
      const ssize_t got = recvfrom(fd, buffer.data(), buffer.size(), 0,
                                   reinterpret_cast<sockaddr*>(&from), &from_len);
      if (got < 0) return;  // drained (EAGAIN), or an error the next poll() reports again
      const unsigned char* icmp = buffer.data();
      std::size_t len = std::min(static_cast<std::size_t>(got), buffer.size());
      if (family == AF_INET) {  // IPv4 raw sockets hand over the IP header as well
        if (len < 20 || buffer[0] >> 4 != 4) continue;
        const std::size_t header = (buffer[0] & 0x0fu) * 4u;
        if (header < 20 || len < header) continue;
        icmp += header;
        len -= header;
      }
      if (len < kHeader + kToken || icmp[1] != 0 || get16(icmp + 4) != id) continue;
      if (icmp[0] != (family == AF_INET ? kEchoReply4 : ICMP6_ECHO_REPLY)) continue;
      if (std::memcmp(icmp + kHeader, token.data(), kToken) != 0) continue;
      for (std::size_t i = (get16(icmp + 6) - seq_base) & 0xffff; i < peers.size(); i += 0x10000) {
        if (peers[i].family == family && same_source(peers[i], from, from_len)) {
          out[i].reachable = true;
        }
      }
    }
  }
};

// A raw socket gets a copy of every ICMP message the node receives: let the kernel keep only echo
// replies (our own requests to a local address come back too), and give the queues room for all
// peers answering at once; the defaults (net.core.rmem_default, about 200 KiB) hold a few hundred
// replies and drop the rest. Best effort: without these the probe is only slower.
void narrow_and_widen(int fd, int family) {
  if (family == AF_INET) {
    icmp_filter blocked{~(1u << kEchoReply4)};  // linux/icmp.h: a set bit drops that type
    setsockopt(fd, SOL_RAW, ICMP_FILTER, &blocked, sizeof blocked);
  } else {
    icmp6_filter filter{};  // RFC 3542 3.2
    ICMP6_FILTER_SETBLOCKALL(&filter);
    ICMP6_FILTER_SETPASS(ICMP6_ECHO_REPLY, &filter);
    setsockopt(fd, IPPROTO_ICMPV6, ICMP6_FILTER, &filter, sizeof filter);
  }
  const int bytes = 4 << 20;
  for (const auto& [force, plain] :
       {std::pair{SO_RCVBUFFORCE, SO_RCVBUF}, std::pair{SO_SNDBUFFORCE, SO_SNDBUF}}) {
    if (setsockopt(fd, SOL_SOCKET, force, &bytes, sizeof bytes) != 0) {
      setsockopt(fd, SOL_SOCKET, plain, &bytes, sizeof bytes);  // capped at net.core.*mem_max
    }
  }
}

// -1 when the family is not needed, or (IPv6) not in this kernel: those peers get the reason.
int open_raw(Probe& probe, int family, const char* what) {
  const bool needed = std::any_of(probe.peers.begin(), probe.peers.end(),
                                  [family](const Peer& p) { return p.family == family; });
  if (!needed) return -1;
  const int fd = socket(family, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK,
                        family == AF_INET ? int{IPPROTO_ICMP} : int{IPPROTO_ICMPV6});
  if (fd >= 0) {
    narrow_and_widen(fd, family);
    return fd;
  }
  const int error = errno;
  if (error != EAFNOSUPPORT) {
    throw Error(ErrorKind::kResource,
                std::string("cannot open a raw ") + what + " socket: " + error_text(error) +
                    "; the reachability probe sends ICMP echo requests and needs root "
                    "(CAP_NET_RAW)");
  }
  for (Peer& peer : probe.peers) {
    if (peer.family != family) continue;
    peer.family = AF_UNSPEC;
    peer.send_error = "socket: " + error_text(error);
  }
  return -1;
}

}  // namespace

std::vector<PeerReachability> probe_echo(const std::vector<std::string>& addresses,
                                         std::chrono::milliseconds budget) {
  const auto start = Clock::now();
  budget = std::max(budget, std::chrono::milliseconds(0));
  if (addresses.empty()) return {};
  Probe probe;
  for (const std::string& address : addresses) {
    probe.peers.push_back(parse(address));
    probe.out.push_back({address, false, ""});
    if (probe.peers.back().family == AF_UNSPEC) {
      probe.peers.back().send_error = "not a numeric IPv4 or IPv6 address";
    }
  }
  Socket v4, v6;
  v4.fd = open_raw(probe, AF_INET, "ICMP");
  v6.fd = open_raw(probe, AF_INET6, "ICMPv6");
  const std::uint64_t bits = random_bits();
  probe.id = bits & 0xffff;
  probe.seq_base = (bits >> 16) & 0xffff;
  const std::uint64_t token = random_bits() ^ (bits >> 32);
  std::memcpy(probe.token.data(), &token, kToken);

  const auto deadline = start + budget;
  int round = 0;
  for (;;) {
    const auto now = Clock::now();
    const auto next_round = start + budget * round / kTries;
    if (round < kTries && now >= next_round) {
      probe.send_round(v4.fd, v6.fd);
      ++round;
      continue;
    }
    if (now >= deadline || !probe.waiting()) break;
    const auto until = round < kTries ? std::min(deadline, next_round) : deadline;
    // poll() takes an int of milliseconds; a longer wait just goes round the loop again.
    const auto wait = std::min<std::int64_t>(
        std::chrono::ceil<std::chrono::milliseconds>(until - now).count(), 60000);
    std::array<pollfd, 2> fds{{{v4.fd, POLLIN, 0}, {v6.fd, POLLIN, 0}}};      // skips fd -1
    if (poll(fds.data(), fds.size(), static_cast<int>(wait)) <= 0) continue;  // timeout, EINTR
    if (fds[0].revents != 0) probe.drain(v4.fd, AF_INET);
    if (fds[1].revents != 0) probe.drain(v6.fd, AF_INET6);
  }

  const std::string silence = "no echo reply within " + std::to_string(budget.count()) + " ms";
  for (std::size_t i = 0; i < probe.out.size(); ++i) {
    const Peer& peer = probe.peers[i];
    if (probe.out[i].reachable) continue;
    if (!peer.in_flight) {
      probe.out[i].detail = peer.send_error;
    } else {
      probe.out[i].detail = peer.send_error.empty() ? silence : silence + "; " + peer.send_error;
    }
  }
  return probe.out;
}

}  // namespace dtrain::core
