// SPDX-License-Identifier: Apache-2.0
#pragma once
// A node's topology as the binding policy needs it, in a small versioned JSON text. slurmd
// writes it next to the cached hwloc XML; a step reads a few kilobytes instead of loading the
// XML into hwloc again. Pure.

#include <string>
#include <string_view>

#include "topology/node_topology.hpp"

namespace dtrain::topology {

// The format's version; a summary of another version is refused and the step falls back.
inline constexpr int kSummaryFormat = 1;

std::string to_summary(const NodeTopology& topology);

// Throws Error(kInvalidInput) naming `source` when the text is not a summary of this format.
NodeTopology from_summary(std::string_view text, const std::string& source);

}  // namespace dtrain::topology
