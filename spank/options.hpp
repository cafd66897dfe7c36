#pragma once

#include "spank/spank_api.hpp"

namespace dtrain::spank {

// Registers --distributed-train[=FRAMEWORKS] in the contexts that parse or forward it.
int register_options(spank_t sp);

}  // namespace dtrain::spank
