// allow_dynamic_shared_memory(): the opt-in a kernel needs before it is launched with more than 48 KB of
// dynamic shared memory, asked of the runtime once per (kernel, device, size) instead of at every launch
// (the attention kernels launch once per layer and step).
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <mutex>
#include <set>
#include <tuple>

#include "cuda/common/cuda_check.hpp"

namespace cbatch {

inline void allow_dynamic_shared_memory(const void* kernel, size_t bytes) {
  constexpr size_t kDefaultLimit = 48 * 1024;
  if (bytes <= kDefaultLimit) return;
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  static std::mutex mutex;
  static std::set<std::tuple<const void*, int, size_t>> allowed;
  const std::lock_guard<std::mutex> lock(mutex);
  const auto key = std::make_tuple(kernel, device, bytes);
  if (allowed.count(key) != 0) return;
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
  allowed.insert(key);
}

}  // namespace cbatch
