// SPDX-License-Identifier: Apache-2.0
#include "bootstrap/buffer.hpp"

#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <utility>

#include "bootstrap/nccl_backend.hpp"
#include "core/error.hpp"

namespace dtrain::bootstrap {

namespace {
constexpr std::size_t kHostAlignment = 4096;
}

BackendBuffer::BackendBuffer(Backend backend, std::size_t bytes) : backend_(backend), size_(bytes) {
  if (backend == Backend::kNccl) {
    data_ = static_cast<std::byte*>(device_allocate(bytes));
    return;
  }
  const std::size_t rounded = (bytes + kHostAlignment - 1) / kHostAlignment * kHostAlignment;
  data_ = static_cast<std::byte*>(
      std::aligned_alloc(kHostAlignment, rounded == 0 ? kHostAlignment : rounded));
  if (data_ == nullptr) {
    throw Error(ErrorKind::kResource, "cannot allocate " + std::to_string(bytes) + " bytes");
  }
}

BackendBuffer::~BackendBuffer() {
  release();
}

BackendBuffer::BackendBuffer(BackendBuffer&& other) noexcept
    : backend_(other.backend_),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

BackendBuffer& BackendBuffer::operator=(BackendBuffer&& other) noexcept {
  if (this != &other) {
    release();
    backend_ = other.backend_;
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void BackendBuffer::release() noexcept {
  if (data_ == nullptr) return;
  if (backend_ == Backend::kNccl) {
    device_free(data_);
  } else {
    std::free(data_);
  }
  data_ = nullptr;
}

void BackendBuffer::check_range(std::size_t offset, std::size_t bytes) const {
  if (offset > size_ || bytes > size_ - offset) {
    throw Error(ErrorKind::kInternal, "buffer access [" + std::to_string(offset) + ", +" +
                                          std::to_string(bytes) + ") outside " +
                                          std::to_string(size_) + " bytes");
  }
}

void BackendBuffer::upload(std::size_t offset, const void* host, std::size_t bytes) {
  check_range(offset, bytes);
  if (bytes == 0) return;
  if (backend_ == Backend::kNccl) {
    device_upload(data_ + offset, host, bytes);
  } else {
    std::memcpy(data_ + offset, host, bytes);
  }
}

void BackendBuffer::download(std::size_t offset, void* host, std::size_t bytes) const {
  check_range(offset, bytes);
  if (bytes == 0) return;
  if (backend_ == Backend::kNccl) {
    device_download(host, data_ + offset, bytes);
  } else {
    std::memcpy(host, data_ + offset, bytes);
  }
}

void BackendBuffer::zero() {
  zero(size_);
}

void BackendBuffer::zero(std::size_t bytes) {
  check_range(0, bytes);
  if (bytes == 0) return;
  if (backend_ == Backend::kNccl) {
    device_zero(data_, bytes);
  } else {
    std::memset(data_, 0, bytes);
  }
}

}  // namespace dtrain::bootstrap
