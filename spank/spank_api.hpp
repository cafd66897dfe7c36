// SPDX-License-Identifier: Apache-2.0
#pragma once
// Slurm 22.05's spank.h declares its functions without C linkage for C++ callers.
extern "C" {
#include <slurm/spank.h>
}
