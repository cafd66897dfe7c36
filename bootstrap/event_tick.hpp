// SPDX-License-Identifier: Apache-2.0
#pragma once
// Open MPI's event tick (bootstrap/README.md, "Open MPI's event tick"): the bootstrap asks for
// mpi_event_tick_rate=1000 through the environment before MPI_Init, but only where nothing else
// sets the parameter: not the environment, and none of the parameter files Open MPI 4.1 reads
// (mca_base_var_cache_files in opal/mca/base/mca_base_var.c: $HOME/.openmpi/mca-params.conf
// and <sysconfdir>/openmpi-mca-params.conf, or the list in mca_base_param_files, and
// <sysconfdir>/openmpi-mca-params-override.conf). After MPI_Init the variable is removed again,
// so that the program's own child processes never see it.

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "bootstrap/environment.hpp"

namespace dtrain::bootstrap {

inline constexpr const char* kEventTickVariable = "OMPI_MCA_mpi_event_tick_rate";
inline constexpr const char* kEventTickRate = "1000";

// A file's content, or nullopt when it cannot be read.
using OptionalFileReader = std::function<std::optional<std::string>(const std::string& path)>;

// Where mpi_event_tick_rate is already set ("the environment", a file's path, or the
// aggregate parameter sets that cannot be checked here); nullopt when nowhere. `sysconfdirs`
// are the candidates for Open MPI's sysconfdir.
std::optional<std::string> event_tick_set_elsewhere(const EnvLookup& lookup,
                                                    const OptionalFileReader& read_file,
                                                    const std::vector<std::string>& sysconfdirs);

// The candidates for this process: $OPAL_SYSCONFDIR, $OPAL_PREFIX/etc, and the sysconfdir of the
// Open MPI dtrain was built with.
std::vector<std::string> open_mpi_sysconfdirs(const EnvLookup& lookup);

// Sets the variable unless set elsewhere (before MPI_Init, before any other thread starts);
// returns whether it did.
bool set_event_tick_for_bootstrap();
// Removes the variable again if set_event_tick_for_bootstrap() set it (after MPI_Init).
void unset_event_tick_after_init(bool was_set);

}  // namespace dtrain::bootstrap
