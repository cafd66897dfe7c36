// SPDX-License-Identifier: Apache-2.0
// Built when dtrain has no NCCL backend (no CUDA toolkit or DTRAIN_WITH_NCCL=OFF).
#include "bootstrap/nccl_backend.hpp"
#include "core/error.hpp"

namespace dtrain::bootstrap {

namespace {

[[noreturn]] void unavailable() {
  throw Error(ErrorKind::kInvalidInput,
              "this dtrain was built without the NCCL backend (no CUDA toolkit with NCCL was "
              "found, or DTRAIN_WITH_NCCL=OFF); use --backend mpi or rebuild with CUDA and NCCL");
}

}  // namespace

bool nccl_compiled_in() {
  return false;
}

void probe_cuda_fingerprint(Fingerprint& fingerprint) {
  fingerprint.nccl_version = "none";
  fingerprint.cuda_runtime = "none";
  fingerprint.cuda_driver = "none";
  fingerprint.gpu_model = "none";
}

int visible_device_count() {
  return 0;
}

std::unique_ptr<Communicator> make_nccl_communicator(const NcclSetup&) {
  unavailable();
}
void* device_allocate(std::size_t) {
  unavailable();
}
void device_free(void*) noexcept {}
void device_upload(void*, const void*, std::size_t) {
  unavailable();
}
void device_download(void*, const void*, std::size_t) {
  unavailable();
}
void device_zero(void*, std::size_t) {
  unavailable();
}

}  // namespace dtrain::bootstrap
