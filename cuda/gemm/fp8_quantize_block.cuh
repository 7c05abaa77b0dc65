// The block code of per-tensor FP8 E4M3 quantization (fp8_quantize.cu, whose header describes it): one pass
// writes each block's largest magnitude (a partial amax), a second derives the tensor's scale from all
// partials in every block and writes x / scale rounded by fp8.hpp (round to nearest even, saturating).
// It uses no CUDA header of its own: include it after cuda_dtype.cuh (to_float, Pack16, block_max), or on the host
// after tests/cuda/block_emulator.hpp and then cuda_dtype.cuh (tests/cuda/test_fp8_quantize_emulated.cpp).
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "engine/model/fp8.hpp"

namespace cbatch::fp8_detail {

constexpr int kFp8Threads = 256;
constexpr int kFp8MaxPartials = 1024;  // blocks of the amax pass, at most

// The dequantization scale of a tensor whose largest magnitude is amax: amax maps to 448, E4M3's largest
// finite value. An all-zero tensor (or one too small for a normal scale) gets 1; a non-finite amax stays
// non-finite (the caller refuses such weights; activations then come out NaN, as they went in).
__device__ __forceinline__ float fp8_scale_from_amax(float amax) {
  const float scale = amax / kFp8E4M3Max;
  return scale > 0.0f ? scale : 1.0f;
}

// Calls f(i, value) for the elements of x (n) T in the block's grid-stride share: 16-byte packs
// (Pack16<T>::kSize elements, one load each) when x is 16-byte aligned, then the elements past the last
// whole pack one by one. A pack is handled by one thread, which f may rely on.
template <typename T, class F>
__device__ __forceinline__ void for_each_element(const T* __restrict__ x, size_t n, F&& f) {
  constexpr int kPack = Pack16<T>::kSize;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  const size_t first = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const size_t packs = reinterpret_cast<uintptr_t>(x) % 16 == 0 ? n / kPack : 0;
  for (size_t p = first; p < packs; p += stride) {
    float v[kPack];
    load_pack_f32(x + p * kPack, v);
    for (int j = 0; j < kPack; ++j) f(p * kPack + j, v[j]);
  }
  for (size_t i = packs * kPack + first; i < n; i += stride) f(i, to_float(x[i]));
}

// partials[blockIdx.x] = the largest |x[i]| of the block's grid-stride share of x (n) T; a NaN or an
// infinity counts as +infinity (fmaxf alone would drop a NaN).
template <typename T>
__device__ __forceinline__ void fp8_amax_block(const T* __restrict__ x, size_t n, float* __restrict__ partials) {
  float amax = 0.0f;
  for_each_element(x, n, [&](size_t, float value) {
    const float a = fabsf(value);
    amax = a <= amax ? amax : (a == a ? a : INFINITY);  // a NaN fails both comparisons
  });
  amax = block_max(amax);
  if (threadIdx.x == 0) partials[blockIdx.x] = amax;
}

// q[i] = E4M3(x[i] / scale) over the block's grid-stride share, scale from the largest of
// partials[0..num_partials); block 0 also stores it at *scale_out. q (n) codes, x (n) T.
template <typename T>
__device__ __forceinline__ void fp8_quantize_block(uint8_t* __restrict__ q, float* __restrict__ scale_out,
                                                   const T* __restrict__ x, size_t n,
                                                   const float* __restrict__ partials, int num_partials) {
  float amax = 0.0f;
  for (int i = threadIdx.x; i < num_partials; i += blockDim.x) amax = fmaxf(amax, partials[i]);
  const float scale = fp8_scale_from_amax(block_max(amax));
  if (blockIdx.x == 0 && threadIdx.x == 0) *scale_out = scale;
  for_each_element(x, n, [&](size_t i, float value) { q[i] = fp8_e4m3_from_float(value / scale); });
}

}  // namespace cbatch::fp8_detail
