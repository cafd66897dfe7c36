// SPDX-License-Identifier: Apache-2.0
// The parts of the bootstrap's MPI adapter that need sockets and threads but not a running MPI:
// the watchdog's early check and the connect probes behind the preflight and the absence check.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <future>
#include <memory>

#include "bootstrap/deadline.hpp"
#include "bootstrap/preflight.hpp"

namespace {

using namespace dtrain::bootstrap;
using namespace std::chrono_literals;

// A loopback port that nothing listens on: bound, then released.
int closed_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address), 0);
  socklen_t length = sizeof address;
  getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  close(fd);
  return ntohs(address.sin_port);
}

TEST(Watchdog, EarlyCheckRunsWhileThePhaseLasts) {
  Watchdog watchdog(Clock::now() + 60s, 60s, "test");
  watchdog.set_phase("waiting");
  std::promise<void> ran;
  watchdog.set_early_check(Clock::now() + 20ms, "waiting", [&] {
    ran.set_value();
    return std::string("finding");
  });
  EXPECT_EQ(ran.get_future().wait_for(10s), std::future_status::ready);
  watchdog.stop();
}

TEST(Watchdog, EarlyCheckIsSkippedOnceThePhaseChanged) {
  Watchdog watchdog(Clock::now() + 60s, 60s, "test");
  watchdog.set_phase("waiting");
  std::atomic<bool> ran{false};
  watchdog.set_early_check(Clock::now() + 100ms, "waiting", [&] {
    ran = true;
    return std::string();
  });
  watchdog.set_phase("done waiting");
  // A later check for the new phase runs, so the skipped one had its turn before it.
  std::promise<void> later;
  std::this_thread::sleep_for(300ms);
  watchdog.set_early_check(Clock::now(), "done waiting", [&] {
    later.set_value();
    return std::string();
  });
  EXPECT_EQ(later.get_future().wait_for(10s), std::future_status::ready);
  EXPECT_FALSE(ran.load());
  watchdog.stop();
}

TEST(ProbePeers, ListeningEndpointsAnswerOthersAreRefused) {
  Listener listener(Endpoint{"127.0.0.1", 0});
  ASSERT_EQ(listener.error(), 0);
  const std::string closed = "127.0.0.1:" + std::to_string(closed_port());
  const auto outcomes = probe_peers({{1, listener.endpoint()}, {2, closed}}, Clock::now() + 5s,
                                    [&] { listener.serve(); });
  ASSERT_EQ(outcomes.size(), 2u);
  EXPECT_EQ(outcomes[0].target, 1);
  EXPECT_EQ(outcomes[0].error, 0);
  EXPECT_EQ(outcomes[1].target, 2);
  EXPECT_EQ(outcomes[1].error, ECONNREFUSED);
}

// A peer that starts listening only after the first connect was refused: within the retry
// window the probe tries again and connects; without one the refusal stands.
TEST(ProbePeers, RefusedConnectsAreRetriedWithinTheWindow) {
  const int port = closed_port();
  const std::string endpoint = "127.0.0.1:" + std::to_string(port);
  const auto refused = probe_peers({{1, endpoint}}, Clock::now() + 5s, {}, Clock::time_point{});
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_EQ(refused[0].error, ECONNREFUSED);

  std::unique_ptr<Listener> late;
  int rounds = 0;
  const auto outcomes = probe_peers(
      {{1, endpoint}}, Clock::now() + 5s,
      [&] {
        // Listen from the third polling round on, after at least one refusal.
        if (++rounds == 3)
          late =
              std::make_unique<Listener>(Endpoint{"127.0.0.1", static_cast<std::uint16_t>(port)});
        if (late) late->serve();
      },
      Clock::now() + 4s);
  ASSERT_NE(late, nullptr);
  ASSERT_EQ(late->error(), 0);
  ASSERT_EQ(outcomes.size(), 1u);
  EXPECT_EQ(outcomes[0].error, 0);
}

// Refusals that last past the window are reported as refused. The deadline is far beyond any
// test timeout: the probe must end with the window, not wait for the deadline.
TEST(ProbePeers, RefusalsPastTheWindowAreReported) {
  const std::string endpoint = "127.0.0.1:" + std::to_string(closed_port());
  const auto outcomes =
      probe_peers({{3, endpoint}}, Clock::now() + 3600s, {}, Clock::now() + 100ms);
  ASSERT_EQ(outcomes.size(), 1u);
  EXPECT_EQ(outcomes[0].target, 3);
  EXPECT_EQ(outcomes[0].error, ECONNREFUSED);
}

// More targets than one batch of open sockets: every one is probed, in order.
TEST(ProbePeers, LargeStepsAreProbedInBatches) {
  Listener listener(Endpoint{"127.0.0.1", 0});
  ASSERT_EQ(listener.error(), 0);
  std::vector<ProbeTarget> targets;
  for (int r = 1; r <= 600; ++r) targets.push_back({r, listener.endpoint()});
  const auto outcomes = probe_peers(targets, Clock::now() + 20s, [&] { listener.serve(); });
  ASSERT_EQ(outcomes.size(), targets.size());
  for (std::size_t i = 0; i < outcomes.size(); ++i) {
    EXPECT_EQ(outcomes[i].target, targets[i].rank);
    EXPECT_EQ(outcomes[i].error, 0) << "target " << targets[i].rank;
  }
}

}  // namespace
