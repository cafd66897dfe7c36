// SPDX-License-Identifier: Apache-2.0
#pragma once
// A buffer in a backend's memory space (host for MPI, device for NCCL), with host copies in
// and out. Used by the benchmark and by trainers that want backend-agnostic buffers.

#include <cstddef>

#include "bootstrap/communicator.hpp"

namespace dtrain::bootstrap {

class BackendBuffer {
 public:
  BackendBuffer(Backend backend, std::size_t bytes);
  ~BackendBuffer();
  BackendBuffer(BackendBuffer&& other) noexcept;
  BackendBuffer& operator=(BackendBuffer&& other) noexcept;
  BackendBuffer(const BackendBuffer&) = delete;
  BackendBuffer& operator=(const BackendBuffer&) = delete;

  std::byte* data() { return data_; }
  std::size_t size() const { return size_; }
  void upload(std::size_t offset, const void* host, std::size_t bytes);
  void download(std::size_t offset, void* host, std::size_t bytes) const;
  // zero(bytes) clears the first `bytes`, so that a sweep clears only what its current size
  // uses; zero() clears the whole buffer.
  void zero(std::size_t bytes);
  void zero();

 private:
  void release() noexcept;
  void check_range(std::size_t offset, std::size_t bytes) const;
  Backend backend_;
  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace dtrain::bootstrap
