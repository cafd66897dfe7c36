// SPDX-License-Identifier: Apache-2.0
#pragma once
// Hostlist expansion through libslurm, so that zero padding ("node[001-003]") and several
// bracket groups ("rack[1-2]-n[01-02]") behave exactly as in Slurm itself.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace dtrain::core {

// Expands `expr` in order, keeping duplicates. Throws dtrain::Error (kInvalidInput) for an
// empty or malformed expression, or one naming more than `max_hosts` hosts.
std::vector<std::string> expand_hostlist(std::string_view expr, std::size_t max_hosts);

}  // namespace dtrain::core
