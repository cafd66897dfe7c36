// SPDX-License-Identifier: Apache-2.0
#include "core/error.hpp"

namespace dtrain {

const char* error_kind_name(ErrorKind kind) noexcept {
  switch (kind) {
    case ErrorKind::kInvalidInput:
      return "invalid input";
    case ErrorKind::kMismatch:
      return "mismatch";
    case ErrorKind::kResource:
      return "resource error";
    case ErrorKind::kInternal:
      return "internal error";
  }
  return "error";
}

}  // namespace dtrain
