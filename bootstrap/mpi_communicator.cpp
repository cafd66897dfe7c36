// SPDX-License-Identifier: Apache-2.0
#include "bootstrap/mpi_communicator.hpp"

#include <algorithm>
#include <array>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "bootstrap/half.hpp"
#include "core/error.hpp"

namespace dtrain::bootstrap {

void check_mpi(int rc, const std::string& call) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(rc, text, &length);
  throw Error(ErrorKind::kResource, call + " failed: " + std::string(text, length));
}

namespace {

int mpi_count(std::size_t count) {
  if (count > static_cast<std::size_t>(INT_MAX)) {
    throw_invalid("the MPI backend takes at most " + std::to_string(INT_MAX) +
                  " elements per call; got " + std::to_string(count));
  }
  return static_cast<int>(count);
}

MPI_Datatype mpi_type(DataType type) {
  switch (type) {
    case DataType::kFloat32:
      return MPI_FLOAT;
    case DataType::kFloat64:
      return MPI_DOUBLE;
    case DataType::kInt32:
      return MPI_INT32_T;
    case DataType::kFloat16:
    case DataType::kBFloat16:
      return MPI_UINT16_T;
  }
  return MPI_DATATYPE_NULL;
}

template <float (*Load)(std::uint16_t), std::uint16_t (*Store)(float), ReduceOp Op>
void reduce_16bit(void* in, void* inout, int* length, MPI_Datatype* /*type*/) {
  const auto* a = static_cast<const std::uint16_t*>(in);
  auto* b = static_cast<std::uint16_t*>(inout);
  for (int i = 0; i < *length; ++i) {
    const float x = Load(a[i]);
    const float y = Load(b[i]);
    float r = 0;
    if constexpr (Op == ReduceOp::kSum) r = x + y;
    if constexpr (Op == ReduceOp::kProd) r = x * y;
    if constexpr (Op == ReduceOp::kMin) r = std::fmin(x, y);
    if constexpr (Op == ReduceOp::kMax) r = std::fmax(x, y);
    b[i] = Store(r);
  }
}

template <float (*Load)(std::uint16_t), std::uint16_t (*Store)(float)>
std::array<MPI_User_function*, 4> functions_16bit() {
  return {reduce_16bit<Load, Store, ReduceOp::kSum>, reduce_16bit<Load, Store, ReduceOp::kProd>,
          reduce_16bit<Load, Store, ReduceOp::kMin>, reduce_16bit<Load, Store, ReduceOp::kMax>};
}

std::size_t op_slot(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      return 0;
    case ReduceOp::kProd:
      return 1;
    case ReduceOp::kMin:
      return 2;
    case ReduceOp::kMax:
      return 3;
  }
  return 0;
}

// avg = sum, then this on the ranks that hold the result.
void divide_in_place(void* data, std::size_t count, DataType type, int divisor) {
  switch (type) {
    case DataType::kFloat32: {
      auto* p = static_cast<float*>(data);
      for (std::size_t i = 0; i < count; ++i) p[i] /= static_cast<float>(divisor);
      return;
    }
    case DataType::kFloat64: {
      auto* p = static_cast<double*>(data);
      for (std::size_t i = 0; i < count; ++i) p[i] /= divisor;
      return;
    }
    case DataType::kInt32: {
      auto* p = static_cast<std::int32_t*>(data);
      for (std::size_t i = 0; i < count; ++i) p[i] /= divisor;
      return;
    }
    case DataType::kFloat16:
    case DataType::kBFloat16: {
      auto* p = static_cast<std::uint16_t*>(data);
      const bool half = type == DataType::kFloat16;
      for (std::size_t i = 0; i < count; ++i) {
        const float value =
            (half ? half_to_float(p[i]) : bf16_to_float(p[i])) / static_cast<float>(divisor);
        p[i] = half ? float_to_half(value) : float_to_bf16(value);
      }
      return;
    }
  }
}

class MpiRequest final : public Request {
 public:
  MpiRequest(MPI_Request request, void* recv, std::size_t count, DataType type, int divisor,
             std::vector<std::byte> send_copy = {})
      : request_(request),
        recv_(recv),
        count_(count),
        type_(type),
        divisor_(divisor),
        send_copy_(std::move(send_copy)) {}
  ~MpiRequest() override {
    if (!done_) MPI_Wait(&request_, MPI_STATUS_IGNORE);
  }
  void wait() override {
    if (done_) return;
    check_mpi(MPI_Wait(&request_, MPI_STATUS_IGNORE), "MPI_Wait");
    finish();
  }
  bool test() override {
    if (done_) return true;
    int flag = 0;
    check_mpi(MPI_Test(&request_, &flag, MPI_STATUS_IGNORE), "MPI_Test");
    if (flag) finish();
    return done_;
  }

 private:
  void finish() {
    done_ = true;
    if (divisor_ > 1) divide_in_place(recv_, count_, type_, divisor_);
  }
  MPI_Request request_;
  void* recv_;
  std::size_t count_;
  DataType type_;
  int divisor_;
  std::vector<std::byte> send_copy_;  // must outlive the request
  bool done_ = false;
};

class MpiCommunicator final : public Communicator {
 public:
  struct Adopt {};
  explicit MpiCommunicator(MPI_Comm parent) : MpiCommunicator(Adopt{}, duplicate(parent)) {}
  MpiCommunicator(Adopt, MPI_Comm owned) : comm_(owned) {
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    const auto half = functions_16bit<half_to_float, float_to_half>();
    const auto bf16 = functions_16bit<bf16_to_float, float_to_bf16>();
    for (std::size_t i = 0; i < 4; ++i) {
      check_mpi(MPI_Op_create(half[i], 1, &half_ops_[i]), "MPI_Op_create");
      check_mpi(MPI_Op_create(bf16[i], 1, &bf16_ops_[i]), "MPI_Op_create");
    }
  }
  ~MpiCommunicator() override {
    for (std::size_t i = 0; i < 4; ++i) {
      MPI_Op_free(&half_ops_[i]);
      MPI_Op_free(&bf16_ops_[i]);
    }
    MPI_Comm_free(&comm_);
  }
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  static MPI_Comm duplicate(MPI_Comm parent) {
    MPI_Comm comm = MPI_COMM_NULL;
    check_mpi(MPI_Comm_dup(parent, &comm), "MPI_Comm_dup");
    return comm;
  }

  Backend backend() const override { return Backend::kMpi; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void all_reduce(const void* send, void* recv, std::size_t count, DataType type,
                  ReduceOp op) override {
    check_mpi(MPI_Allreduce(in_place_if(send == recv, send), recv, mpi_count(count), mpi_type(type),
                            mpi_op(type, op), comm_),
              "MPI_Allreduce");
    if (op == ReduceOp::kAvg) divide_in_place(recv, count, type, size_);
  }

  std::unique_ptr<Request> all_reduce_async(const void* send, void* recv, std::size_t count,
                                            DataType type, ReduceOp op) override {
    // Open MPI's libnbc runs every in-place MPI_Iallreduce as a binomial reduce + broadcast,
    // which sends log2(size) whole buffers through rank 0's link; with a separate send buffer
    // it picks reduce-scatter + all-gather (or a ring). A copy of the buffer costs far less.
    std::vector<std::byte> send_copy;
    if (send == recv && size_ > 1) {
      const auto* first = static_cast<const std::byte*>(send);
      send_copy.assign(first, first + count * type_size(type));
      send = send_copy.data();
    }
    MPI_Request request;
    check_mpi(MPI_Iallreduce(in_place_if(send == recv, send), recv, mpi_count(count),
                             mpi_type(type), mpi_op(type, op), comm_, &request),
              "MPI_Iallreduce");
    return std::make_unique<MpiRequest>(request, recv, count, type,
                                        op == ReduceOp::kAvg ? size_ : 1, std::move(send_copy));
  }

  void all_gather(const void* send, void* recv, std::size_t count, DataType type) override {
    const bool in_place = send == block(recv, count, type, rank_);
    check_mpi(MPI_Allgather(in_place_if(in_place, send), mpi_count(count), mpi_type(type), recv,
                            mpi_count(count), mpi_type(type), comm_),
              "MPI_Allgather");
  }

  void reduce_scatter(const void* send, void* recv, std::size_t count, DataType type,
                      ReduceOp op) override {
    // NCCL's in-place form has recv at this rank's block of send; MPI's has recv == send and
    // leaves the result at the front, so that form needs one block-sized move.
    const bool nccl_in_place =
        rank_ != 0 && recv == block(const_cast<void*>(send), count, type, rank_);
    if (send == recv || nccl_in_place) {
      void* whole = const_cast<void*>(send);
      check_mpi(MPI_Reduce_scatter_block(MPI_IN_PLACE, whole, mpi_count(count), mpi_type(type),
                                         mpi_op(type, op), comm_),
                "MPI_Reduce_scatter_block");
      if (nccl_in_place) std::memmove(recv, whole, count * type_size(type));
    } else {
      check_mpi(MPI_Reduce_scatter_block(send, recv, mpi_count(count), mpi_type(type),
                                         mpi_op(type, op), comm_),
                "MPI_Reduce_scatter_block");
    }
    if (op == ReduceOp::kAvg) divide_in_place(recv, count, type, size_);
  }

  void broadcast(const void* send, void* recv, std::size_t count, DataType type,
                 int root) override {
    if (rank_ == root && send != recv) std::memcpy(recv, send, count * type_size(type));
    check_mpi(MPI_Bcast(recv, mpi_count(count), mpi_type(type), root, comm_), "MPI_Bcast");
  }

  void reduce(const void* send, void* recv, std::size_t count, DataType type, ReduceOp op,
              int root) override {
    check_mpi(MPI_Reduce(in_place_if(rank_ == root && send == recv, send), recv, mpi_count(count),
                         mpi_type(type), mpi_op(type, op), root, comm_),
              "MPI_Reduce");
    if (op == ReduceOp::kAvg && rank_ == root) divide_in_place(recv, count, type, size_);
  }

  void gather(const void* send, void* recv, std::size_t count, DataType type, int root) override {
    check_mpi(MPI_Gather(send, mpi_count(count), mpi_type(type), recv, mpi_count(count),
                         mpi_type(type), root, comm_),
              "MPI_Gather");
  }

  void all_to_all(const void* send, void* recv, std::size_t count, DataType type) override {
    check_mpi(MPI_Alltoall(in_place_if(send == recv, send), mpi_count(count), mpi_type(type), recv,
                           mpi_count(count), mpi_type(type), comm_),
              "MPI_Alltoall");
  }

  void send_recv_ring(const void* send, void* recv, std::size_t count, DataType type) override {
    const int next = (rank_ + 1) % size_;
    const int previous = (rank_ - 1 + size_) % size_;
    constexpr int kTag = 0x5752;
    if (send == recv) {
      check_mpi(MPI_Sendrecv_replace(recv, mpi_count(count), mpi_type(type), next, kTag, previous,
                                     kTag, comm_, MPI_STATUS_IGNORE),
                "MPI_Sendrecv_replace");
      return;
    }
    check_mpi(
        MPI_Sendrecv(send, mpi_count(count), mpi_type(type), next, kTag, recv, mpi_count(count),
                     mpi_type(type), previous, kTag, comm_, MPI_STATUS_IGNORE),
        "MPI_Sendrecv");
  }

  void barrier() override { check_mpi(MPI_Barrier(comm_), "MPI_Barrier"); }
  void synchronize() override {}

 private:
  static const void* in_place_if(bool in_place, const void* send) {
    return in_place ? MPI_IN_PLACE : send;
  }
  static const void* block(void* base, std::size_t count, DataType type, int index) {
    return static_cast<const char*>(base) +
           static_cast<std::size_t>(index) * count * type_size(type);
  }
  MPI_Op mpi_op(DataType type, ReduceOp op) const {
    const std::size_t slot = op_slot(op);
    if (type == DataType::kFloat16) return half_ops_[slot];
    if (type == DataType::kBFloat16) return bf16_ops_[slot];
    const std::array<MPI_Op, 4> builtin = {MPI_SUM, MPI_PROD, MPI_MIN, MPI_MAX};
    return builtin[slot];
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
  std::array<MPI_Op, 4> half_ops_{};
  std::array<MPI_Op, 4> bf16_ops_{};
};

}  // namespace

std::unique_ptr<Communicator> make_mpi_communicator(MPI_Comm parent) {
  return std::make_unique<MpiCommunicator>(parent);
}

std::unique_ptr<Communicator> adopt_mpi_communicator(MPI_Comm owned) {
  return std::make_unique<MpiCommunicator>(MpiCommunicator::Adopt{}, owned);
}

}  // namespace dtrain::bootstrap
