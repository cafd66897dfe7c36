// SPDX-License-Identifier: Apache-2.0
#include "bootstrap/communicator.hpp"

namespace dtrain::bootstrap {

std::size_t type_size(DataType type) {
  switch (type) {
    case DataType::kFloat32:
    case DataType::kInt32:
      return 4;
    case DataType::kFloat64:
      return 8;
    case DataType::kFloat16:
    case DataType::kBFloat16:
      return 2;
  }
  return 0;
}

const char* type_name(DataType type) {
  switch (type) {
    case DataType::kFloat32:
      return "float";
    case DataType::kFloat64:
      return "double";
    case DataType::kInt32:
      return "int32";
    case DataType::kFloat16:
      return "half";
    case DataType::kBFloat16:
      return "bfloat16";
  }
  return "unknown";
}

const char* op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kProd:
      return "prod";
    case ReduceOp::kMin:
      return "min";
    case ReduceOp::kMax:
      return "max";
    case ReduceOp::kAvg:
      return "avg";
  }
  return "unknown";
}

const char* backend_name(Backend backend) {
  switch (backend) {
    case Backend::kMpi:
      return "mpi";
    case Backend::kNccl:
      return "nccl";
  }
  return "unknown";
}

}  // namespace dtrain::bootstrap
