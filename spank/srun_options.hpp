// SPDX-License-Identifier: Apache-2.0
#pragma once
// srun, sbatch and salloc (local and allocator contexts, as the submitting user): the
// --distributed-train option. Its callback also runs in slurmstepd, which receives the
// option's value from srun.

#include "spank/spank_api.hpp"

namespace dtrain::spank {

// Registers --distributed-train[=FRAMEWORKS] in the contexts that parse or forward it.
int register_options(spank_t sp);

}  // namespace dtrain::spank
