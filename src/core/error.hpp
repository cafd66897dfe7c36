// SPDX-License-Identifier: Apache-2.0
#pragma once
// Typed errors raised by the core. Every adapter (plugin, tools, bootstrap) catches
// dtrain::Error at its boundary and reports what() prefixed with "dtrain:".

#include <stdexcept>
#include <string>

namespace dtrain {

enum class ErrorKind {
  kInvalidInput,  // user, Slurm or plugstack.conf gave something we cannot accept
  kMismatch,      // two sources that must agree do not (layout vs SLURM_GTIDS, ranks vs MPI)
  kResource,      // the system refused something (file, socket, topology load)
  kInternal,      // a bug in dtrain
};

const char* error_kind_name(ErrorKind kind) noexcept;

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const noexcept { return kind_; }

 private:
  ErrorKind kind_;
};

[[noreturn]] inline void throw_invalid(const std::string& message) {
  throw Error(ErrorKind::kInvalidInput, message);
}

}  // namespace dtrain
