// SPDX-License-Identifier: Apache-2.0
// Its own object file: the bootstrap checks DTRAIN_ENDPOINTS_HASH with this definition without
// linking the planner (and libslurm's hostlist functions with it).
#include <xxhash.h>

#include <cstdio>

#include "core/step_plan.hpp"

namespace dtrain::core {

std::string endpoints_hash(std::string_view endpoints) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx",
                static_cast<unsigned long long>(XXH3_64bits(endpoints.data(), endpoints.size())));
  return hex;
}

}  // namespace dtrain::core
