// SPDX-License-Identifier: Apache-2.0
#pragma once
// A deadline on every blocking collective of a communicator. A peer that died, or a network
// between nodes that stopped carrying messages, otherwise leaves the other ranks blocked until
// MPI's or NCCL's own timeouts (NCCL has none by default; a TCP connection whose peer vanished
// retransmits for minutes). With the deadline a rank blocked longer than the limit in one call
// says which call and how long, and ends with kExitNodeFault (75), on which a batch script
// requeues its job (docs/admin.md, "Bad nodes") to resume from its checkpoint on other nodes.
//
// One watchdog thread per wrapped communicator wakes every 100 ms; a call costs two atomic stores.

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "bootstrap/communicator.hpp"

namespace dtrain::bootstrap {

// What happens when a call passes the deadline: `message` names the call and the time. The
// default prints "dtrain: <message>" on stderr and ends the process with kExitNodeFault.
using DeadlineExpiry = std::function<void(const std::string& message)>;

// `inner` must outlive the result. `who` names this rank in the message ("rank 3 on node2").
std::unique_ptr<Communicator> with_collective_deadline(Communicator& inner,
                                                       std::chrono::milliseconds limit,
                                                       std::string who,
                                                       DeadlineExpiry on_expiry = nullptr);

}  // namespace dtrain::bootstrap
