// SPDX-License-Identifier: Apache-2.0
#pragma once
// srun, sbatch and salloc (local and allocator contexts, as the submitting user): the
// --distributed-train and --distributed-train-gpu-view options. Their callbacks also run in
// slurmstepd, which receives the options' values from srun.

#include "spank/spank_api.hpp"

namespace dtrain::spank {

// Registers --distributed-train[=FRAMEWORKS] and --distributed-train-gpu-view=VIEW in the
// contexts that parse or forward them.
int register_options(spank_t sp);

}  // namespace dtrain::spank
