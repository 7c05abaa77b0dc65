// Owning RAII handles for device memory (cudaMalloc) and pinned host memory (cudaMallocHost). Move-only;
// an allocation failure throws cbatch::Error with the byte count, so "model too large" reads as such.
// Host-only and C++17-clean.
#pragma once
#include <cstddef>
#include <cstdio>
#include <string>
#include <utility>

#include "cuda/common/cuda_check.hpp"

namespace cbatch {

// "12.34 GiB", for error messages about memory.
inline std::string gib_string(double bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f GiB", bytes / (1024.0 * 1024.0 * 1024.0));
  return text;
}

template <typename T, bool kPinned>
class CudaAllocation {
 public:
  CudaAllocation() = default;
  explicit CudaAllocation(size_t count) : count_(count) {
    if (count == 0) return;
    void* ptr = nullptr;
    const cudaError_t err = kPinned ? cudaMallocHost(&ptr, bytes()) : cudaMalloc(&ptr, bytes());
    if (err != cudaSuccess) {
      cudaGetLastError();  // clear the error so later calls do not report it again
      throw Error(std::string(kPinned ? "cudaMallocHost" : "cudaMalloc") + " of " + gib_string(bytes()) +
                  " failed: " + cudaGetErrorString(err));
    }
    ptr_ = static_cast<T*>(ptr);
  }
  ~CudaAllocation() { release(); }
  CudaAllocation(CudaAllocation&& other) noexcept
      : ptr_(std::exchange(other.ptr_, nullptr)), count_(std::exchange(other.count_, 0)) {}
  CudaAllocation& operator=(CudaAllocation&& other) noexcept {
    if (this != &other) {
      release();
      ptr_ = std::exchange(other.ptr_, nullptr);
      count_ = std::exchange(other.count_, 0);
    }
    return *this;
  }
  CudaAllocation(const CudaAllocation&) = delete;
  CudaAllocation& operator=(const CudaAllocation&) = delete;

  T* get() const { return ptr_; }
  size_t size() const { return count_; }
  size_t bytes() const { return count_ * sizeof(T); }

 private:
  void release() {
    if (ptr_ == nullptr) return;
    if constexpr (kPinned) {
      cudaFreeHost(ptr_);  // errors in destructors cannot be reported; the pointer is ours
    } else {
      cudaFree(ptr_);
    }
    ptr_ = nullptr;
    count_ = 0;
  }

  T* ptr_ = nullptr;
  size_t count_ = 0;
};

template <typename T>
using DeviceBuffer = CudaAllocation<T, false>;
template <typename T>
using PinnedBuffer = CudaAllocation<T, true>;

}  // namespace cbatch
