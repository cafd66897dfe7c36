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

// A failed connection between two nodes: the host of the rank that connected and of the rank it
// could not reach.
struct FailedLink {
  std::string from;
  std::string to;
};

// The node to suspect: the one node that is an end of every failed link between two different
// nodes. Nobody when there is no such link, when two nodes share that role (every failure is
// between the same two nodes: either may be at fault), or when no node is common to all (several
// independent faults, or the network between groups of nodes). Links within one node say nothing
// about the node's network to the others and are not counted.
std::optional<std::string> suspect_node(const std::vector<FailedLink>& links);

// The report's line for the suspect, or for why there is none; "" when no link failed.
std::string describe_suspect(const std::vector<FailedLink>& links);

// Every failure, listen failures first, in rank order. Empty when the preflight passed.
std::vector<std::string> describe_preflight(const std::vector<RankRecord>& records,
                                            const std::vector<std::vector<ProbeOutcome>>& outcomes);

}  // namespace dtrain::bootstrap
