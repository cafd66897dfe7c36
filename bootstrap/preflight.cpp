// SPDX-License-Identifier: Apache-2.0
#include "bootstrap/preflight.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstring>

#include "bootstrap/peers.hpp"
#include "core/error.hpp"

namespace dtrain::bootstrap {

namespace {

struct Resolved {
  sockaddr_storage address{};
  socklen_t length = 0;
  int family = AF_INET;
  int error = 0;  // errno-style
};

Resolved resolve(const Endpoint& endpoint) {
  Resolved out;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* result = nullptr;
  const std::string port = std::to_string(endpoint.port);
  if (getaddrinfo(endpoint.host.c_str(), port.c_str(), &hints, &result) != 0 || result == nullptr) {
    out.error = EHOSTUNREACH;
    return out;
  }
  std::memcpy(&out.address, result->ai_addr, result->ai_addrlen);
  out.length = result->ai_addrlen;
  out.family = result->ai_family;
  freeaddrinfo(result);
  return out;
}

std::string numeric(const sockaddr_storage& address, socklen_t length) {
  char host[NI_MAXHOST];
  char service[NI_MAXSERV];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&address), length, host, sizeof host, service,
                  sizeof service, NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    return "?";
  }
  return to_string(Endpoint{host, static_cast<std::uint16_t>(std::stoi(service))});
}

}  // namespace

Listener::Listener(const Endpoint& endpoint) : endpoint_(to_string(endpoint)) {
  Resolved where = resolve(endpoint);
  if (where.error != 0) {
    error_ = EADDRNOTAVAIL;
    return;
  }
  fd_ = socket(where.family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd_ < 0) {
    error_ = errno;
    return;
  }
  const int on = 1;
  setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  if (bind(fd_, reinterpret_cast<const sockaddr*>(&where.address), where.length) != 0 ||
      listen(fd_, SOMAXCONN) != 0) {
    error_ = errno;
    close();
    return;
  }
  sockaddr_storage bound{};
  socklen_t length = sizeof bound;
  if (getsockname(fd_, reinterpret_cast<sockaddr*>(&bound), &length) == 0) {
    endpoint_ = numeric(bound, length);
  }
}

Listener::~Listener() {
  close();
}

void Listener::serve() {
  if (fd_ < 0) return;
  while (true) {
    const int fd = accept4(fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) break;
    accepted_.push_back(fd);
  }
  std::erase_if(accepted_, [](int fd) {
    char byte;
    const ssize_t got = recv(fd, &byte, 1, 0);
    if (got == 0 || (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
      ::close(fd);
      return true;
    }
    return false;
  });
}

void Listener::close() {
  for (int fd : accepted_) ::close(fd);
  accepted_.clear();
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

Endpoint derived_endpoint() {
  char name[HOST_NAME_MAX + 1] = {};
  if (gethostname(name, sizeof name - 1) != 0) {
    throw Error(ErrorKind::kResource, std::string("gethostname failed: ") + std::strerror(errno));
  }
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  const int rc = getaddrinfo(name, nullptr, &hints, &result);
  if (rc != 0 || result == nullptr) {
    throw Error(ErrorKind::kResource,
                std::string("cannot resolve this host's name '") + name +
                    "' for the preflight endpoint: " + gai_strerror(rc) +
                    "; add it to /etc/hosts or launch with srun --distributed-train");
  }
  char host[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(result->ai_addr)->sin_addr, host,
            sizeof host);
  freeaddrinfo(result);
  return Endpoint{host, 0};
}

namespace {

// Starts a non-blocking connect: the socket while it is in progress, else -1 with `error` set
// (0 when it connected at once).
int start_connect(const ProbeTarget& target, int& error) {
  error = 0;
  Resolved where = resolve(parse_endpoint(target.endpoint, "peer endpoint"));
  if (where.error != 0) {
    error = where.error;
    return -1;
  }
  const int fd = socket(where.family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    error = errno;
    return -1;
  }
  if (connect(fd, reinterpret_cast<const sockaddr*>(&where.address), where.length) == 0) {
    ::close(fd);
    return -1;
  }
  if (errno == EINPROGRESS) return fd;
  error = errno;
  ::close(fd);
  return -1;
}

std::vector<ProbeOutcome> probe_batch(std::span<const ProbeTarget> targets,
                                      Clock::time_point deadline,
                                      const std::function<void()>& between,
                                      Clock::time_point retry_refused_until) {
  constexpr auto kRetryPause = std::chrono::milliseconds(5);
  std::vector<ProbeOutcome> outcomes;
  std::vector<int> sockets;
  std::vector<Clock::time_point> retry_at(targets.size(), Clock::time_point::max());
  // A refused connect is tried again, a pause later, until `retry_refused_until`.
  const auto settle = [&](std::size_t i, int error) {
    const auto now = Clock::now();
    if (error == ECONNREFUSED && now + kRetryPause < retry_refused_until) {
      retry_at[i] = now + kRetryPause;
    } else {
      outcomes[i].error = error;
    }
  };
  for (std::size_t i = 0; i < targets.size(); ++i) {
    outcomes.push_back({targets[i].rank, 0});
    int error = 0;
    sockets.push_back(start_connect(targets[i], error));
    if (sockets.back() < 0) settle(i, error);
  }
  while (true) {
    const auto now = Clock::now();
    auto next_retry = Clock::time_point::max();
    for (std::size_t i = 0; i < targets.size(); ++i) {
      if (retry_at[i] == Clock::time_point::max()) continue;
      if (retry_at[i] <= now) {
        retry_at[i] = Clock::time_point::max();
        int error = 0;
        sockets[i] = start_connect(targets[i], error);
        if (sockets[i] < 0) settle(i, error);
      }
      next_retry = std::min(next_retry, retry_at[i]);
    }
    std::vector<pollfd> waiting;
    std::vector<std::size_t> index;
    for (std::size_t i = 0; i < sockets.size(); ++i) {
      if (sockets[i] < 0) continue;
      waiting.push_back({sockets[i], POLLOUT, 0});
      index.push_back(i);
    }
    if (between) between();
    if (waiting.empty() && next_retry == Clock::time_point::max()) break;
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      for (std::size_t i : index) {
        outcomes[i].error = ETIMEDOUT;
        ::close(sockets[i]);
        sockets[i] = -1;
      }
      for (std::size_t i = 0; i < targets.size(); ++i) {
        if (retry_at[i] != Clock::time_point::max()) outcomes[i].error = ECONNREFUSED;
      }
      break;
    }
    // Short slices keep `between` (our own listener) answering peers that probe us meanwhile.
    long slice = std::min<long>(left.count(), 20);
    if (next_retry != Clock::time_point::max()) {
      const auto until_retry =
          std::chrono::duration_cast<std::chrono::milliseconds>(next_retry - Clock::now());
      slice = std::clamp<long>(until_retry.count() + 1, 0, slice);
    }
    poll(waiting.data(), waiting.size(), static_cast<int>(slice));
    for (std::size_t k = 0; k < waiting.size(); ++k) {
      if (waiting[k].revents == 0) continue;
      const std::size_t i = index[k];
      int error = 0;
      socklen_t length = sizeof error;
      getsockopt(sockets[i], SOL_SOCKET, SO_ERROR, &error, &length);
      ::close(sockets[i]);
      sockets[i] = -1;
      settle(i, error);
    }
  }
  return outcomes;
}

}  // namespace

std::vector<ProbeOutcome> probe_peers(const std::vector<ProbeTarget>& targets,
                                      Clock::time_point deadline,
                                      const std::function<void()>& between,
                                      Clock::time_point retry_refused_until) {
  // Bounded so that probing every rank of a large step stays within the file descriptor limit.
  constexpr std::size_t kOpenAtOnce = 256;
  const std::span<const ProbeTarget> all(targets);
  std::vector<ProbeOutcome> outcomes;
  for (std::size_t first = 0; first < all.size(); first += kOpenAtOnce) {
    const auto batch = probe_batch(all.subspan(first, std::min(kOpenAtOnce, all.size() - first)),
                                   deadline, between, retry_refused_until);
    outcomes.insert(outcomes.end(), batch.begin(), batch.end());
  }
  return outcomes;
}

std::vector<std::vector<ProbeOutcome>> run_connectivity_preflight(
    MPI_Comm comm, const std::vector<std::string>& endpoints, Listener& listener,
    Clock::time_point probe_deadline, const DeadlineWaiter& wait) {
  constexpr std::size_t kMaxProbes = 64;
  int rank = 0, size = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  std::vector<ProbeTarget> targets;
  for (int peer : preflight_peers(rank, size)) {
    targets.push_back({peer, endpoints.at(static_cast<std::size_t>(peer))});
  }
  const std::function<void()> serve = [&listener] { listener.serve(); };
  const auto outcomes = probe_peers(targets, probe_deadline, serve);

  std::vector<std::int32_t> mine(1 + 2 * kMaxProbes, 0);
  mine[0] = static_cast<std::int32_t>(std::min(outcomes.size(), kMaxProbes));
  for (std::size_t i = 0; i < static_cast<std::size_t>(mine[0]); ++i) {
    mine[1 + 2 * i] = outcomes[i].target;
    mine[2 + 2 * i] = outcomes[i].error;
  }
  std::vector<std::int32_t> all(mine.size() * static_cast<std::size_t>(size));
  // Rank 0 broadcasts the results only once every rank has sent its own, so until then some
  // rank may still be probing: `wait` keeps `listener` answering meanwhile. Then the port is
  // freed.
  allgather_through_root(mine.data(), static_cast<int>(mine.size() * sizeof(std::int32_t)),
                         all.data(), comm, wait, "gathering the preflight results");
  listener.close();
  std::vector<std::vector<ProbeOutcome>> by_source(static_cast<std::size_t>(size));
  for (std::size_t source = 0; source < by_source.size(); ++source) {
    const std::int32_t* row = all.data() + source * mine.size();
    for (std::int32_t i = 0; i < row[0]; ++i) {
      by_source[source].push_back({row[1 + 2 * i], row[2 + 2 * i]});
    }
  }
  return by_source;
}

}  // namespace dtrain::bootstrap
