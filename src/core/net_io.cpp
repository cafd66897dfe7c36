// SPDX-License-Identifier: Apache-2.0
#include "core/net_io.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/error.hpp"

namespace dtrain::core {

std::string local_host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) {
    throw Error(ErrorKind::kResource, std::string("gethostname: ") + std::strerror(errno));
  }
  return name;
}

std::string resolve_host(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = getaddrinfo(host.c_str(), nullptr, &hints, &found);
  if (rc != 0) {
    throw_invalid(
        "cannot resolve host name '" + host + "': " + gai_strerror(rc) +
        "; check the node name, the suffix= setting in plugstack.conf, or use address=name");
  }
  std::string best;
  for (const addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) {
    char text[INET6_ADDRSTRLEN] = {};
    const void* raw = nullptr;
    if (ai->ai_family == AF_INET) {
      raw = &reinterpret_cast<const sockaddr_in*>(ai->ai_addr)->sin_addr;
    } else if (ai->ai_family == AF_INET6) {
      raw = &reinterpret_cast<const sockaddr_in6*>(ai->ai_addr)->sin6_addr;
    } else {
      continue;
    }
    if (inet_ntop(ai->ai_family, raw, text, sizeof text) == nullptr) continue;
    if (ai->ai_family == AF_INET) {
      best = text;
      break;
    }
    if (best.empty()) best = text;
  }
  freeaddrinfo(found);
  if (best.empty()) throw_invalid("host name '" + host + "' has no IPv4 or IPv6 address");
  return best;
}

std::string hosts_line(const std::string& host, const std::string& hosts_file) {
  std::ifstream in(hosts_file);
  for (std::string line; std::getline(in, line);) {
    line = line.substr(0, line.find('#'));
    std::istringstream words(line);
    std::string address;
    words >> address;
    for (std::string name; words >> name;) {
      if (name != host) continue;
      const auto first = line.find_first_not_of(" \t");
      const auto last = line.find_last_not_of(" \t\r");
      return line.substr(first, last - first + 1);
    }
  }
  return {};
}

namespace {

// The kernel prints each 32-bit word of an address in host byte order as 8 hex digits.
std::string kernel_hex(const void* raw, std::size_t bytes) {
  std::string out;
  char word[9];
  for (std::size_t i = 0; i < bytes; i += 4) {
    std::uint32_t value = 0;
    std::memcpy(&value, static_cast<const unsigned char*>(raw) + i, 4);
    std::snprintf(word, sizeof word, "%08X", value);
    out += word;
  }
  return out;
}

}  // namespace

std::optional<std::uint32_t> listener_uid_in(std::string_view table, const std::string& addr,
                                             std::uint16_t port) {
  in_addr v4{};
  in6_addr v6{};
  std::string wanted;
  std::string wildcard;
  if (inet_pton(AF_INET, addr.c_str(), &v4) == 1) {
    wanted = kernel_hex(&v4, 4);
    wildcard = std::string(8, '0');
  } else if (inet_pton(AF_INET6, addr.c_str(), &v6) == 1) {
    wanted = kernel_hex(&v6, 16);
    wildcard = std::string(32, '0');
  } else {
    return std::nullopt;
  }
  char port_hex[5];
  std::snprintf(port_hex, sizeof port_hex, "%04X", port);
  std::istringstream lines{std::string(table)};
  std::string line;
  std::getline(lines, line);  // the header
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    std::string slot, local, remote, state, queues, timer, retransmits, uid;
    if (!(fields >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid)) {
      continue;
    }
    const auto colon = local.find(':');
    if (state != "0A" || colon == std::string::npos || local.substr(colon + 1) != port_hex)
      continue;
    const std::string listen_addr = local.substr(0, colon);
    // A dual-stack listener on [::] takes the IPv4 port as well.
    const bool any_v6 = listen_addr == std::string(32, '0');
    if (listen_addr != wanted && listen_addr != wildcard && !any_v6) continue;
    try {
      return static_cast<std::uint32_t>(std::stoul(uid));
    } catch (const std::exception&) {
      continue;
    }
  }
  return std::nullopt;
}

std::optional<std::uint32_t> listener_uid(const std::string& addr, std::uint16_t port) {
  for (const char* path : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(path);
    std::ostringstream text;
    text << in.rdbuf();
    if (auto uid = listener_uid_in(text.str(), addr, port)) return uid;
  }
  return std::nullopt;
}

bool port_in_use(const std::string& addr, std::uint16_t port) {
  sockaddr_storage storage{};
  socklen_t len = 0;
  int family = AF_INET;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&storage);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&storage);
  if (inet_pton(AF_INET, addr.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
    len = sizeof *v4;
  } else if (inet_pton(AF_INET6, addr.c_str(), &v6->sin6_addr) == 1) {
    family = AF_INET6;
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(port);
    len = sizeof *v6;
  } else {
    return false;  // a name, not an address: nothing local to probe
  }
  const int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  // SO_REUSEADDR ignores TIME_WAIT leftovers, so only a live listener counts as "in use".
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  const bool busy =
      bind(fd, reinterpret_cast<sockaddr*>(&storage), len) != 0 && errno == EADDRINUSE;
  close(fd);
  return busy;
}

namespace {

bool plain_interface_name(const char* name) {
  const std::string_view text(name);
  return !text.empty() && text.size() <= 15 && text != "." && text != ".." &&
         std::all_of(text.begin(), text.end(), [](char c) {
           return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '.' || c == '_' || c == ':' || c == '-';
         });
}

// One line of a sysfs attribute (at most 64 bytes), without its newline; nothing when unreadable.
std::optional<std::string> read_attribute(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return std::nullopt;
  char buffer[64];
  const ssize_t got = ::read(fd, buffer, sizeof buffer);
  ::close(fd);
  if (got <= 0) return std::nullopt;
  std::string text(buffer, static_cast<std::size_t>(got));
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

}  // namespace

std::optional<std::string> interface_with_address(const std::string& address) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return std::nullopt;
  std::optional<std::string> found;
  for (const ifaddrs* ifa = list; ifa != nullptr && !found; ifa = ifa->ifa_next) {
    if (ifa->ifa_addr == nullptr || ifa->ifa_name == nullptr) continue;
    const int family = ifa->ifa_addr->sa_family;
    const void* raw = nullptr;
    if (family == AF_INET) {
      raw = &reinterpret_cast<const sockaddr_in*>(ifa->ifa_addr)->sin_addr;
    } else if (family == AF_INET6) {
      raw = &reinterpret_cast<const sockaddr_in6*>(ifa->ifa_addr)->sin6_addr;
    } else {
      continue;
    }
    char text[INET6_ADDRSTRLEN] = {};
    if (inet_ntop(family, raw, text, sizeof text) == nullptr || address != text) continue;
    if (plain_interface_name(ifa->ifa_name)) found = ifa->ifa_name;
  }
  freeifaddrs(list);
  return found;
}

LinkState link_state(const std::string& name) {
  LinkState state;
  if (!plain_interface_name(name.c_str())) return state;
  const std::string dir = "/sys/class/net/" + name + "/";
  if (const auto carrier = read_attribute(dir + "carrier"); carrier == "0" || carrier == "1") {
    state.carrier = *carrier == "1" ? 1 : 0;
  }
  state.operstate = read_attribute(dir + "operstate").value_or("");
  return state;
}

}  // namespace dtrain::core
