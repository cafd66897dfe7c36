// LD_PRELOAD library that gives a task on an emulated node the wildcard-bind semantics of a real
// node.
//
// The local Slurm cluster emulates nodes with mount and UTS namespaces only; all nodes share one
// network namespace and node N owns the address 127.0.1.N. A server that binds the wildcard address
// (0.0.0.0 or [::]) on port P therefore claims P on every emulated node at once, and a second node
// using the same P fails with EADDRINUSE, although on real, separate hosts both binds succeed.
// TensorFlow's gRPC server always binds "0.0.0.0:<port of its TF_CONFIG entry>", and the contract
// gives the same port (base_port + local_rank) to equal local ranks on different nodes, so the TF
// client needs this on the emulated cluster (and only there).
//
// The shim rewrites a wildcard bind to a bind on this task's node address, the host part of
// DTRAIN_CURRENT_ENDPOINT (exported by the plugin), which is what the wildcard covers on a real
// node of its own. It only ever narrows a bind to a 127.0.0.0/8 address; with any other or no
// DTRAIN_CURRENT_ENDPOINT, every bind passes through unchanged.
#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string_view>

namespace {

using BindFunction = int (*)(int, const sockaddr*, socklen_t);

std::optional<in_addr> node_loopback_address() {
  const char* endpoint = std::getenv("DTRAIN_CURRENT_ENDPOINT");
  if (endpoint == nullptr) {
    return std::nullopt;
  }
  const std::string_view text(endpoint);
  const auto colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon >= INET_ADDRSTRLEN) {
    return std::nullopt;
  }
  char host[INET_ADDRSTRLEN] = {};
  text.copy(host, colon);
  in_addr address{};
  if (inet_pton(AF_INET, host, &address) != 1 || (ntohl(address.s_addr) >> 24) != 127) {
    return std::nullopt;
  }
  return address;
}

BindFunction next_bind() {
  static const auto function = reinterpret_cast<BindFunction>(dlsym(RTLD_NEXT, "bind"));
  return function;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int bind(int fd, const sockaddr* address,
                                                           socklen_t length) {
  const BindFunction real_bind = next_bind();
  if (real_bind == nullptr) {
    errno = ENOSYS;
    return -1;
  }
  const auto node_address = node_loopback_address();
  if (!node_address || address == nullptr) {
    return real_bind(fd, address, length);
  }
  if (address->sa_family == AF_INET && length >= sizeof(sockaddr_in)) {
    sockaddr_in narrowed{};
    std::memcpy(&narrowed, address, sizeof narrowed);
    if (narrowed.sin_addr.s_addr == htonl(INADDR_ANY)) {
      narrowed.sin_addr = *node_address;
      return real_bind(fd, reinterpret_cast<const sockaddr*>(&narrowed), sizeof narrowed);
    }
  } else if (address->sa_family == AF_INET6 && length >= sizeof(sockaddr_in6)) {
    sockaddr_in6 narrowed{};
    std::memcpy(&narrowed, address, sizeof narrowed);
    if (IN6_IS_ADDR_UNSPECIFIED(&narrowed.sin6_addr)) {
      // The IPv4-mapped form (::ffff:127.0.1.N) keeps a dual-stack socket usable for the IPv4
      // connections the peers make to this node's address.
      narrowed.sin6_addr = in6addr_any;
      narrowed.sin6_addr.s6_addr[10] = 0xff;
      narrowed.sin6_addr.s6_addr[11] = 0xff;
      std::memcpy(&narrowed.sin6_addr.s6_addr[12], &node_address->s_addr, sizeof(in_addr_t));
      return real_bind(fd, reinterpret_cast<const sockaddr*>(&narrowed), sizeof narrowed);
    }
  }
  return real_bind(fd, address, length);
}
