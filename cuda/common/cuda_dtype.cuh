// Device helpers shared by the kernels: conversion between the element types {float, bf16, fp16} and
// fp32, 16-byte vector loads, and warp/block reductions. Included only from .cu files.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

namespace cbatch {

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }

// Round to nearest even, as the host-side conversions do.
template <typename T>
__device__ __forceinline__ T from_float(float v);
template <>
__device__ __forceinline__ float from_float<float>(float v) { return v; }
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
template <>
__device__ __forceinline__ __half from_float<__half>(float v) { return __float2half_rn(v); }

// 16 bytes of elements: 4 floats or 8 bf16/fp16.
template <typename T>
struct alignas(16) Pack16 {
  static constexpr int kSize = 16 / sizeof(T);
  T v[kSize];
};

// Loads Pack16<T>::kSize elements from a 16-byte aligned address and widens them to fp32.
template <typename T>
__device__ __forceinline__ void load_pack_f32(const T* src, float* dst) {
  const Pack16<T> pack = *reinterpret_cast<const Pack16<T>*>(src);
#pragma unroll
  for (int i = 0; i < Pack16<T>::kSize; ++i) dst[i] = to_float(pack.v[i]);
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// Sum (MAX = false) or largest value (MAX = true) over the whole block, returned to every thread.
// blockDim.x must be a multiple of 32. Uses one static shared array per kind: call each at most once per
// kernel (or __syncthreads() between calls).
template <bool MAX>
__device__ __forceinline__ float block_reduce(float v) {
  __shared__ float partial[32];  // (num_warps)
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  v = MAX ? warp_max(v) : warp_sum(v);
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  const int num_warps = blockDim.x / 32;
  const float mine = lane < num_warps ? partial[lane] : (MAX ? -INFINITY : 0.0f);
  return MAX ? warp_max(mine) : warp_sum(mine);
}

__device__ __forceinline__ float block_sum(float v) { return block_reduce<false>(v); }
__device__ __forceinline__ float block_max(float v) { return block_reduce<true>(v); }

}  // namespace cbatch
