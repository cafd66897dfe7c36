// SPDX-License-Identifier: Apache-2.0
// The epilog's reachability probe (core/reachability_io.hpp), over this machine's real network.
// It needs a raw socket, so every case that sends skips unless run as root.

#include <gtest/gtest.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/reachability_io.hpp"

namespace dtrain::core {
namespace {

using std::chrono::milliseconds;

// Empty when this process may open a raw ICMP socket of `family`; else why not.
std::string no_raw_socket(int family) {
  const int fd = socket(family, SOCK_RAW | SOCK_CLOEXEC,
                        family == AF_INET ? int{IPPROTO_ICMP} : int{IPPROTO_ICMPV6});
  if (fd < 0) return std::string("cannot open a raw socket: ") + std::strerror(errno);
  close(fd);
  return {};
}

bool has_ipv6_loopback() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return false;
  bool found = false;
  for (const ifaddrs* ifa = list; ifa != nullptr; ifa = ifa->ifa_next) {
    if (ifa->ifa_addr == nullptr || ifa->ifa_addr->sa_family != AF_INET6) continue;
    sockaddr_in6 v6{};
    std::memcpy(&v6, ifa->ifa_addr, sizeof v6);
    found = found || IN6_IS_ADDR_LOOPBACK(&v6.sin6_addr);
  }
  freeifaddrs(list);
  return found;
}

#define SKIP_UNLESS_RAW(family)                                            \
  if (const std::string why = no_raw_socket(family); !why.empty()) {       \
    GTEST_SKIP() << "the echo probe needs root (CAP_NET_RAW) and " << why; \
  }

TEST(ReachabilityIo, AnEmptyListReturnsAtOnce) {
  // No socket is opened for no addresses, so this holds without root too.
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(probe_echo({}, milliseconds(60000)).empty());
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(1000));
}

// What probe_echo says as `nobody`: root drops to it in a child (setuid clears CAP_NET_RAW);
// anyone else already is such a user. "drop: REASON" when root cannot drop to it here.
std::string refusal_without_root() {
  const auto probe = []() -> std::string {
    try {
      probe_echo({"127.0.0.1"}, milliseconds(100));
      return "no error";
    } catch (const Error& e) {
      return std::string(error_kind_name(e.kind())) + ": " + e.what();
    }
  };
  if (geteuid() != 0) return probe();
  int fds[2];
  if (pipe(fds) != 0) return "drop: pipe failed";
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    const std::string said = setgid(65534) == 0 && setuid(65534) == 0
                                 ? probe()
                                 : std::string("drop: ") + std::strerror(errno);
    const ssize_t written = write(fds[1], said.data(), said.size());
    _exit(written == static_cast<ssize_t>(said.size()) ? 0 : 1);
  }
  close(fds[1]);
  std::string said;
  char buffer[512];
  for (ssize_t got; (got = read(fds[0], buffer, sizeof buffer)) > 0;) said.append(buffer, got);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return said;
}

TEST(ReachabilityIo, WithoutARawSocketItThrowsAndSaysItNeedsRoot) {
  if (geteuid() != 0 && no_raw_socket(AF_INET).empty()) {
    GTEST_SKIP() << "this user has CAP_NET_RAW without being root";
  }
  const std::string said = refusal_without_root();
  if (said.rfind("drop: ", 0) == 0) GTEST_SKIP() << "cannot become nobody here: " << said;
  EXPECT_EQ(said.rfind("resource error: cannot open a raw ICMP socket: ", 0), 0u) << said;
  EXPECT_NE(said.find("needs root (CAP_NET_RAW)"), std::string::npos) << said;
}

TEST(ReachabilityIo, Ipv4LoopbackAnswers) {
  SKIP_UNLESS_RAW(AF_INET);
  const auto outcome = probe_echo({"127.0.0.1"}, milliseconds(1500));
  ASSERT_EQ(outcome.size(), 1u);
  EXPECT_EQ(outcome[0].address, "127.0.0.1");
  EXPECT_TRUE(outcome[0].reachable) << outcome[0].detail;
  EXPECT_EQ(outcome[0].detail, "");
}

TEST(ReachabilityIo, Ipv6LoopbackAnswers) {
  SKIP_UNLESS_RAW(AF_INET6);
  if (!has_ipv6_loopback()) GTEST_SKIP() << "this machine has no IPv6 loopback address (::1)";
  const auto outcome = probe_echo({"::1"}, milliseconds(1500));
  ASSERT_EQ(outcome.size(), 1u);
  EXPECT_TRUE(outcome[0].reachable) << outcome[0].detail;
}

// DTRAIN_TEST_SILENT_ADDRESS names an address that never answers echo. The default is in
// TEST-NET-3 (RFC 5737: documentation only, never assigned), away from the 198.18.0.0/15 subnets
// of the local cluster (slurm/local/cluster.sh); where no route leads there, sendto fails instead.
std::string silent_address() {
  const char* given = std::getenv("DTRAIN_TEST_SILENT_ADDRESS");
  return given != nullptr && *given != '\0' ? given : "203.0.113.254";
}

TEST(ReachabilityIo, ASilentPeerIsUnreachableAndTheBudgetHolds) {
  SKIP_UNLESS_RAW(AF_INET);
  const std::string silent = silent_address();
  const milliseconds budget(600);
  const auto start = std::chrono::steady_clock::now();
  const auto outcome = probe_echo({silent, "127.0.0.1"}, budget);
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_EQ(outcome.size(), 2u);
  EXPECT_FALSE(outcome[0].reachable);
  // A peer with no route fails at sendto; one routed somewhere that drops it stays silent.
  EXPECT_TRUE(outcome[0].detail == "no echo reply within 600 ms" ||
              outcome[0].detail.rfind("sendto: ", 0) == 0)
      << outcome[0].detail;
  EXPECT_TRUE(outcome[1].reachable) << outcome[1].detail;
  // A bound on waiting, not a performance figure: loose enough for a loaded machine.
  EXPECT_LT(took, budget + milliseconds(1000));
}

TEST(ReachabilityIo, ASendFailureIsTheDetail) {
  SKIP_UNLESS_RAW(AF_INET);
  // Linux refuses broadcast without SO_BROADCAST (EACCES), before anything leaves the node.
  const auto outcome = probe_echo({"255.255.255.255"}, milliseconds(300));
  ASSERT_EQ(outcome.size(), 1u);
  EXPECT_FALSE(outcome[0].reachable);
  EXPECT_EQ(outcome[0].detail.rfind("sendto: ", 0), 0u) << outcome[0].detail;
}

TEST(ReachabilityIo, ANameIsNoAddress) {
  // Nothing numeric, nothing to send: no socket is opened, so this part holds without root too.
  const auto names = probe_echo({"node1", ""}, milliseconds(1000));
  ASSERT_EQ(names.size(), 2u);
  for (const auto& outcome : names) {
    EXPECT_FALSE(outcome.reachable);
    EXPECT_EQ(outcome.detail, "not a numeric IPv4 or IPv6 address");
  }
  SKIP_UNLESS_RAW(AF_INET);
  const auto outcome = probe_echo(
      {"node1", "127.0.0.1 ", std::string("127.0.0.1\0x", 11), "127.0.0.1"}, milliseconds(1000));
  ASSERT_EQ(outcome.size(), 4u);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_FALSE(outcome[i].reachable) << i;
    EXPECT_EQ(outcome[i].detail, "not a numeric IPv4 or IPv6 address") << i;
  }
  EXPECT_TRUE(outcome[3].reachable) << outcome[3].detail;
}

TEST(ReachabilityIo, DuplicatesEachGetAnOutcome) {
  SKIP_UNLESS_RAW(AF_INET);
  const std::vector<std::string> asked = {"127.0.0.1", silent_address(), "127.0.0.1", "127.0.0.1"};
  const auto outcome = probe_echo(asked, milliseconds(600));
  ASSERT_EQ(outcome.size(), asked.size());
  for (std::size_t i = 0; i < asked.size(); ++i) EXPECT_EQ(outcome[i].address, asked[i]);
  EXPECT_TRUE(outcome[0].reachable) << outcome[0].detail;
  EXPECT_FALSE(outcome[1].reachable);
  EXPECT_TRUE(outcome[2].reachable) << outcome[2].detail;
  EXPECT_TRUE(outcome[3].reachable) << outcome[3].detail;
}

}  // namespace
}  // namespace dtrain::core
