// SPDX-License-Identifier: Apache-2.0
#pragma once
// The TCP side of the connectivity preflight: a listener on this rank's endpoint that accepts
// and then waits for the peer to hang up (so TIME_WAIT lands on the connecting side, not on
// the endpoint port the framework binds later), non-blocking connects with a deadline, and the
// collective step that runs them on every rank and gathers the outcomes.

#include <mpi.h>

#include <functional>
#include <span>
#include <string>
#include <vector>

#include "bootstrap/deadline.hpp"
#include "bootstrap/endpoints.hpp"
#include "bootstrap/gather.hpp"
#include "bootstrap/preflight_report.hpp"

namespace dtrain::bootstrap {

class Listener {
 public:
  // Binds with SO_REUSEADDR and listens; a failure is kept in error(), not thrown, so that
  // it can be reported with the other ranks' results. Port 0 picks an ephemeral port.
  explicit Listener(const Endpoint& endpoint);
  ~Listener();
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;

  int error() const { return error_; }
  // The bound endpoint (with the real port when 0 was asked for).
  const std::string& endpoint() const { return endpoint_; }
  // Accepts pending connections and closes those whose peer has hung up. Never blocks.
  void serve();
  void close();

 private:
  int fd_ = -1;
  int error_ = 0;
  std::string endpoint_;
  std::vector<int> accepted_;
};

// For runs without the plugin: this host's name resolved to an IPv4 address, port 0.
Endpoint derived_endpoint();

// Connects to every target at once; each outcome is 0, an errno or ETIMEDOUT at `deadline`.
// `between` runs every polling round (the preflight keeps its own listener answering there).
// Until `retry_refused_until` a refused connect is tried again (for probes that may reach a
// peer before it listens).
std::vector<ProbeOutcome> probe_peers(const std::vector<ProbeTarget>& targets,
                                      Clock::time_point deadline,
                                      const std::function<void()>& between = {},
                                      Clock::time_point retry_refused_until = {});

// Collective over `comm`: this rank probes preflight_peers(rank, size) at `endpoints` (indexed
// by rank; a rank that could not listen is probed too, so whoever answers there is found) until
// `probe_deadline`, keeps `listener` answering until every rank has finished probing, closes it,
// and all-gathers the outcomes. `wait` must keep `listener` answering while it waits (the
// bootstrap's and dtrain-check's waiters serve their listener each round). Returns the outcomes
// by source rank (at most 64 per rank), ready for describe_preflight().
std::vector<std::vector<ProbeOutcome>> run_connectivity_preflight(
    MPI_Comm comm, const std::vector<std::string>& endpoints, Listener& listener,
    Clock::time_point probe_deadline, const DeadlineWaiter& wait);

}  // namespace dtrain::bootstrap
