// SPDX-License-Identifier: Apache-2.0
#pragma once
// What a rank of dtrain-check learns about itself and its node from the system: environment,
// affinity, network interfaces, whether its ports are free, and the node's GPUs (hwloc).

#include "check/facts.hpp"

namespace dtrain::check {

// Everything that needs no other rank. Must run before this step listens anywhere (that is,
// before the bootstrap), so that a busy port means another process holds it. Fills plugin,
// environment, cpus_allowed, ports and interfaces; never throws for what it cannot read.
RankFacts probe_rank();

// The node's GPUs from the live hwloc topology (no NVML or CUDA needed). On failure leaves
// gpus unset and says why in topology_error.
void probe_node(RankFacts& facts);

}  // namespace dtrain::check
