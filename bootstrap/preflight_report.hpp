// SPDX-License-Identifier: Apache-2.0
#pragma once
// Turns preflight outcomes into messages that name both ranks, both hosts, the port and the
// errno text. Pure: records and numbers in, text out.

#include <optional>
#include <string>
#include <vector>

#include "bootstrap/environment.hpp"

namespace dtrain::bootstrap {

// A peer to probe: its rank and its endpoint as text.
struct ProbeTarget {
  int rank;
  std::string endpoint;
};

std::string describe_listen_failure(const RankRecord& rank);
std::string describe_probe_failure(const RankRecord& source, const RankRecord& target, int error);
// The target could not listen, yet the connect succeeded: another process answers there.
std::string describe_impostor(const RankRecord& source, const RankRecord& target);

// Before MPI_Init returns no rank knows who is missing, but the plugin's endpoint list names
// every rank's endpoint, where each rank listens from the start of its bootstrap. `outcomes`
// are connects to those endpoints (indexed by `endpoints`); the ranks that did not answer are
// named with their endpoints. Empty when every probed rank answered.
std::string describe_absent_ranks(const std::vector<std::string>& endpoints,
                                  const std::vector<ProbeOutcome>& outcomes);

// Every failure, listen failures first, in rank order. Empty when the preflight passed.
std::vector<std::string> describe_preflight(const std::vector<RankRecord>& records,
                                            const std::vector<std::vector<ProbeOutcome>>& outcomes);

}  // namespace dtrain::bootstrap
