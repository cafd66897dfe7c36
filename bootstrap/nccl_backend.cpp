// SPDX-License-Identifier: Apache-2.0
// The NCCL backend: device buffers, collectives enqueued on one stream per communicator,
// synchronize() waits for them while watching for asynchronous NCCL errors.
#include "bootstrap/nccl_backend.hpp"

#include <cuda_runtime.h>
#include <nccl.h>

#include <string>
#include <thread>

#include "bootstrap/mpi_communicator.hpp"
#include "core/error.hpp"

namespace dtrain::bootstrap {

namespace {

void cuda_check(cudaError_t rc, const char* call) {
  if (rc == cudaSuccess) return;
  throw Error(ErrorKind::kResource, std::string(call) + " failed: " + cudaGetErrorString(rc));
}

std::string nccl_text(ncclComm_t comm, ncclResult_t rc) {
  std::string text = ncclGetErrorString(rc);
  const char* last = comm != nullptr ? ncclGetLastError(comm) : nullptr;
  if (last != nullptr && *last != '\0') text += " (" + std::string(last) + ")";
  return text;
}

// Non-blocking communicators may answer ncclInProgress; wait for the call to settle.
void nccl_check(ncclComm_t comm, ncclResult_t rc, const char* call) {
  while (rc == ncclInProgress) {
    std::this_thread::yield();
    if (ncclCommGetAsyncError(comm, &rc) != ncclSuccess) break;
  }
  if (rc != ncclSuccess) {
    throw Error(ErrorKind::kResource, std::string(call) + " failed: " + nccl_text(comm, rc));
  }
}

ncclDataType_t nccl_type(DataType type) {
  switch (type) {
    case DataType::kFloat32:
      return ncclFloat32;
    case DataType::kFloat64:
      return ncclFloat64;
    case DataType::kInt32:
      return ncclInt32;
    case DataType::kFloat16:
      return ncclFloat16;
    case DataType::kBFloat16:
      return ncclBfloat16;
  }
  return ncclFloat32;
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return ncclSum;
    case ReduceOp::kProd:
      return ncclProd;
    case ReduceOp::kMin:
      return ncclMin;
    case ReduceOp::kMax:
      return ncclMax;
    case ReduceOp::kAvg:
      return ncclAvg;
  }
  return ncclSum;
}

std::string version_text(int code, int major_scale, int minor_scale) {
  return std::to_string(code / major_scale) + "." +
         std::to_string(code % major_scale / minor_scale) + "." +
         std::to_string(code % minor_scale);
}

class NcclRequest final : public Request {
 public:
  explicit NcclRequest(cudaStream_t stream) {
    cuda_check(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming), "cudaEventCreate");
    cuda_check(cudaEventRecord(event_, stream), "cudaEventRecord");
  }
  ~NcclRequest() override { cudaEventDestroy(event_); }
  void wait() override { cuda_check(cudaEventSynchronize(event_), "cudaEventSynchronize"); }
  bool test() override {
    const cudaError_t rc = cudaEventQuery(event_);
    if (rc == cudaErrorNotReady) return false;
    cuda_check(rc, "cudaEventQuery");
    return true;
  }

 private:
  cudaEvent_t event_{};
};

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(ncclComm_t comm, cudaStream_t stream, int rank, int size)
      : comm_(comm), stream_(stream), rank_(rank), size_(size) {}
  ~NcclCommunicator() override {
    cudaStreamSynchronize(stream_);
    ncclResult_t rc = ncclCommFinalize(comm_);
    while (rc == ncclInProgress) ncclCommGetAsyncError(comm_, &rc);
    ncclCommDestroy(comm_);
    cudaStreamDestroy(stream_);
  }
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  Backend backend() const override { return Backend::kNccl; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void all_reduce(const void* send, void* recv, std::size_t count, DataType type,
                  ReduceOp op) override {
    nccl_check(comm_,
               ncclAllReduce(send, recv, count, nccl_type(type), nccl_op(op), comm_, stream_),
               "ncclAllReduce");
  }
  std::unique_ptr<Request> all_reduce_async(const void* send, void* recv, std::size_t count,
                                            DataType type, ReduceOp op) override {
    all_reduce(send, recv, count, type, op);
    return std::make_unique<NcclRequest>(stream_);
  }
  void all_gather(const void* send, void* recv, std::size_t count, DataType type) override {
    nccl_check(comm_, ncclAllGather(send, recv, count, nccl_type(type), comm_, stream_),
               "ncclAllGather");
  }
  void reduce_scatter(const void* send, void* recv, std::size_t count, DataType type,
                      ReduceOp op) override {
    nccl_check(comm_,
               ncclReduceScatter(send, recv, count, nccl_type(type), nccl_op(op), comm_, stream_),
               "ncclReduceScatter");
  }
  void broadcast(const void* send, void* recv, std::size_t count, DataType type,
                 int root) override {
    nccl_check(comm_, ncclBroadcast(send, recv, count, nccl_type(type), root, comm_, stream_),
               "ncclBroadcast");
  }
  void reduce(const void* send, void* recv, std::size_t count, DataType type, ReduceOp op,
              int root) override {
    nccl_check(comm_,
               ncclReduce(send, recv, count, nccl_type(type), nccl_op(op), root, comm_, stream_),
               "ncclReduce");
  }
  void gather(const void* send, void* recv, std::size_t count, DataType type, int root) override {
    const std::size_t block = count * type_size(type);
    nccl_check(comm_, ncclGroupStart(), "ncclGroupStart");
    if (rank_ == root) {
      for (int peer = 0; peer < size_; ++peer) {
        nccl_check(comm_,
                   ncclRecv(static_cast<char*>(recv) + static_cast<std::size_t>(peer) * block,
                            count, nccl_type(type), peer, comm_, stream_),
                   "ncclRecv");
      }
    }
    nccl_check(comm_, ncclSend(send, count, nccl_type(type), root, comm_, stream_), "ncclSend");
    nccl_check(comm_, ncclGroupEnd(), "ncclGroupEnd");
  }
  void all_to_all(const void* send, void* recv, std::size_t count, DataType type) override {
    const std::size_t block = count * type_size(type);
    nccl_check(comm_, ncclGroupStart(), "ncclGroupStart");
    for (int peer = 0; peer < size_; ++peer) {
      const auto offset = static_cast<std::size_t>(peer) * block;
      nccl_check(comm_,
                 ncclSend(static_cast<const char*>(send) + offset, count, nccl_type(type), peer,
                          comm_, stream_),
                 "ncclSend");
      nccl_check(
          comm_,
          ncclRecv(static_cast<char*>(recv) + offset, count, nccl_type(type), peer, comm_, stream_),
          "ncclRecv");
    }
    nccl_check(comm_, ncclGroupEnd(), "ncclGroupEnd");
  }
  void send_recv_ring(const void* send, void* recv, std::size_t count, DataType type) override {
    nccl_check(comm_, ncclGroupStart(), "ncclGroupStart");
    nccl_check(comm_, ncclSend(send, count, nccl_type(type), (rank_ + 1) % size_, comm_, stream_),
               "ncclSend");
    nccl_check(comm_,
               ncclRecv(recv, count, nccl_type(type), (rank_ - 1 + size_) % size_, comm_, stream_),
               "ncclRecv");
    nccl_check(comm_, ncclGroupEnd(), "ncclGroupEnd");
  }
  void barrier() override {
    // A one-element all-reduce on a scratch buffer, completed before returning.
    if (scratch_ == nullptr) cuda_check(cudaMalloc(&scratch_, sizeof(float)), "cudaMalloc");
    all_reduce(scratch_, scratch_, 1, DataType::kFloat32, ReduceOp::kSum);
    synchronize();
  }
  void synchronize() override {
    // Poll instead of cudaStreamSynchronize so that a failed peer surfaces as an NCCL error.
    while (true) {
      const cudaError_t rc = cudaStreamQuery(stream_);
      if (rc == cudaSuccess) return;
      if (rc != cudaErrorNotReady) cuda_check(rc, "cudaStreamQuery");
      ncclResult_t async = ncclSuccess;
      ncclCommGetAsyncError(comm_, &async);
      if (async != ncclSuccess && async != ncclInProgress) {
        throw Error(ErrorKind::kResource, "NCCL reported an error while waiting for the stream: " +
                                              nccl_text(comm_, async));
      }
      std::this_thread::yield();
    }
  }

 private:
  ncclComm_t comm_;
  cudaStream_t stream_;
  int rank_;
  int size_;
  void* scratch_ = nullptr;
};

}  // namespace

bool nccl_compiled_in() {
  return true;
}

void probe_cuda_fingerprint(Fingerprint& fingerprint) {
  int nccl = 0;
  fingerprint.nccl_version =
      ncclGetVersion(&nccl) == ncclSuccess ? version_text(nccl, 10000, 100) : "unknown";
  int runtime = 0;
  fingerprint.cuda_runtime =
      cudaRuntimeGetVersion(&runtime) == cudaSuccess ? version_text(runtime, 1000, 10) : "unknown";
  int driver = 0;
  fingerprint.cuda_driver = cudaDriverGetVersion(&driver) == cudaSuccess && driver > 0
                                ? version_text(driver, 1000, 10)
                                : "none";
  fingerprint.gpu_model = "none";
  int devices = 0;
  if (cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0) {
    cudaDeviceProp properties{};
    if (cudaGetDeviceProperties(&properties, 0) == cudaSuccess)
      fingerprint.gpu_model = properties.name;
  } else {
    cudaGetLastError();  // clear the sticky "no device" error
  }
}

int visible_device_count() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return devices;
}

std::unique_ptr<Communicator> make_nccl_communicator(const NcclSetup& setup) {
  cuda_check(cudaSetDevice(setup.device), "cudaSetDevice");
  ncclUniqueId id{};
  if (setup.rank == 0) {
    const ncclResult_t rc = ncclGetUniqueId(&id);
    if (rc != ncclSuccess) {
      throw Error(ErrorKind::kResource, "ncclGetUniqueId failed: " + nccl_text(nullptr, rc));
    }
  }
  MPI_Request request;
  check_mpi(MPI_Ibcast(&id, sizeof id, MPI_BYTE, 0, setup.comm, &request), "MPI_Ibcast");
  wait_for_requests(setup.wait, {&request, 1}, "waiting for rank 0's NCCL unique id");
  // The barrier before init matters with HCOLL, where a blocking init can otherwise deadlock.
  check_mpi(MPI_Ibarrier(setup.comm, &request), "MPI_Ibarrier");
  wait_for_requests(setup.wait, {&request, 1}, "in the barrier before ncclCommInitRankConfig");
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  ncclResult_t state = ncclCommInitRankConfig(&comm, setup.size, id, setup.rank, &config);
  setup.wait(
      [&] {
        if (state == ncclInProgress) ncclCommGetAsyncError(comm, &state);
        return state != ncclInProgress;
      },
      "in ncclCommInitRankConfig on device " + std::to_string(setup.device) +
          " (another rank may be missing, or NCCL cannot connect: check NCCL_SOCKET_IFNAME and "
          "NCCL_IB_HCA, and run with NCCL_DEBUG=INFO)",
      [&] { ncclCommAbort(comm); });
  if (state != ncclSuccess) {
    const std::string text = nccl_text(comm, state);
    if (comm != nullptr) ncclCommAbort(comm);
    throw Error(ErrorKind::kResource, "ncclCommInitRankConfig failed: " + text);
  }
  cudaStream_t stream = nullptr;
  cuda_check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  return std::make_unique<NcclCommunicator>(comm, stream, setup.rank, setup.size);
}

void* device_allocate(std::size_t bytes) {
  void* pointer = nullptr;
  cuda_check(cudaMalloc(&pointer, bytes == 0 ? 1 : bytes), "cudaMalloc");
  return pointer;
}
void device_free(void* pointer) noexcept {
  cudaFree(pointer);
}
void device_upload(void* device, const void* host, std::size_t bytes) {
  cuda_check(cudaMemcpy(device, host, bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
}
void device_download(void* host, const void* device, std::size_t bytes) {
  cuda_check(cudaMemcpy(host, device, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
}
void device_zero(void* device, std::size_t bytes) {
  cuda_check(cudaMemset(device, 0, bytes), "cudaMemset");
}

}  // namespace dtrain::bootstrap
