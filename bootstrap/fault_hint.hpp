// SPDX-License-Identifier: Apache-2.0
#pragma once
// The task's side of the fault hint (core/fault_hint.hpp): a rank on the node that the
// preflight's verdict names as the suspect writes one line to the pipe that the plugin passed
// as DTRAIN_FAULT_HINT_FD (node_check=on), so that the job's epilog on that node runs its deeper
// checks. Without the variable (plain mpirun, node_check=off) nothing is written.

#include "core/fault_hint.hpp"

namespace dtrain::bootstrap {

// Writes the hint in one write(2) when DTRAIN_FAULT_HINT_FD names a descriptor of this process
// that is the pipe DTRAIN_FAULT_HINT_PIPE names; returns whether it did. Never throws and never blocks: the hint is advice, and a failed step
// must end the same way with or without it.
bool write_fault_hint(const core::FaultHint& hint) noexcept;

}  // namespace dtrain::bootstrap
