// SPDX-License-Identifier: Apache-2.0
#pragma once
// Which ranks share this rank's node, as the launcher's PMIx server tells the MPI library
// (PMIX_LOCAL_PEERS, the list Open MPI takes its node-local ranks from), read from the PMIx
// client the MPI library already runs: no communication, O(ranks on the node).
//
// The client library is found with dlopen(RTLD_NOLOAD): only when the MPI library loaded it,
// and so initialised it (PMIx_Initialized), is it asked. dtrain links no PMIx library itself.

#include <optional>
#include <string>

#include "bootstrap/agreement.hpp"

namespace dtrain::bootstrap {

// nullopt when there is no PMIx client in the process, it was not initialised, PMIX_RANK is not
// `mpi_rank`, or the server has no PMIX_LOCAL_PEERS; then MPI_Comm_split_type decides.
std::optional<NodeMembers> launcher_node_members(int mpi_rank);

// "0,1,2,5" (PMIX_LOCAL_PEERS) as ranks; nullopt unless it is such a list holding `rank`.
std::optional<NodeMembers> parse_local_peers(const std::string& text, int rank);

}  // namespace dtrain::bootstrap
