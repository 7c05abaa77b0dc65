// Reading and writing paged-cache elements of type KV in the kernels: KV is the compute type T (read and
// written as it is) or Fp8E4M3 (kv_cache_dtype.hpp), dequantized to fp32 times the layer's scale on every
// read and quantized as value / scale with fp8.hpp's rounding (nearest even, saturating) on every write,
// the same arithmetic on the GPU, in the block emulator and in the tests' reference. It uses no CUDA header
// of its own: include it after cuda_dtype.cuh (to_float, from_float), or on the host after
// tests/cuda/block_emulator.hpp and then cuda_dtype.cuh (or warp_mma_emulator.hpp's from_float, for the
// tensor-core kernels, which read the cache only through load_kv_pack_as).
#pragma once
#include <cstdint>

#if defined(__CUDACC__)
#include <cuda_fp8.h>  // the hardware conversion of fp8x2_to_float2 (never in the host emulation)
#endif

#include "cuda/attention/kv_cache_dtype.hpp"
#include "engine/model/fp8.hpp"

namespace cbatch {

// 16 bytes of elements E (as cuda_dtype.cuh's Pack16, which the tensor-core kernels' emulation lacks).
template <typename E>
struct alignas(16) KvPack16 {
  static constexpr int kSize = 16 / static_cast<int>(sizeof(E));
  E v[kSize];
};

// Two E4M3 codes (the first in the low byte) as floats: one cvt instruction on sm_89 and newer, fp8.hpp's
// integer arithmetic (about ten instructions a code) on older GPUs and on the host. Both are exact: every
// E4M3 value is an fp16 value, and the tests compare fp8.hpp with CUDA's conversions.
__device__ __forceinline__ float2 fp8x2_to_float2(uint16_t codes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  return __half22float2(__half2(__nv_cvt_fp8x2_to_halfraw2(codes, __NV_E4M3)));
#else
  return float2{fp8_e4m3_to_float(static_cast<uint8_t>(codes & 0xFFu)),
                fp8_e4m3_to_float(static_cast<uint8_t>(codes >> 8))};
#endif
}

// The scale a kernel applies to its layer's K or V: *scale for an FP8 cache, 1 (never read) otherwise.
template <typename KV>
__device__ __forceinline__ float kv_scale(const float* scale) {
  if constexpr (kFp8Kv<KV>) {
    return *scale;
  } else {
    return 1.0f;
  }
}

template <typename KV>
__device__ __forceinline__ KV kv_from_float(float v, float scale) {
  if constexpr (kFp8Kv<KV>) {
    return fp8_e4m3_from_float(v / scale);
  } else {
    return from_float<KV>(v);
  }
}

// KvPack16<KV>::kSize cache elements (16 bytes, 16-byte aligned) widened to fp32: 4 floats, 8 bf16/fp16 or
// 16 FP8 codes (times the scale).
template <typename KV>
__device__ __forceinline__ void load_kv_pack_f32(const KV* src, float* dst, float scale) {
  const KvPack16<KV> pack = *reinterpret_cast<const KvPack16<KV>*>(src);
  if constexpr (kFp8Kv<KV>) {
#pragma unroll
    for (int i = 0; i < KvPack16<KV>::kSize; i += 2) {
      const float2 f = fp8x2_to_float2(static_cast<uint16_t>(pack.v[i] | (pack.v[i + 1] << 8)));
      dst[i] = f.x * scale;
      dst[i + 1] = f.y * scale;
    }
  } else {
#pragma unroll
    for (int i = 0; i < KvPack16<KV>::kSize; ++i) dst[i] = to_float(pack.v[i]);
  }
}

// KvPack16<T>::kSize consecutive cache elements as T (the tensor-core kernels' operand type), into a 16-byte
// aligned dst: a plain 16-byte copy where KV is T, else 16 / sizeof(T) FP8 codes (8-byte aligned)
// dequantized and rounded to T (exact where the scale is 1: every E4M3 value is a bf16 and an fp16 value).
template <typename T, typename KV>
__device__ __forceinline__ void load_kv_pack_as(T* dst, const KV* src, float scale) {
  if constexpr (kFp8Kv<KV>) {
    constexpr int kSize = KvPack16<T>::kSize;
    static_assert(kSize == 8, "FP8 caches serve 16-bit compute types");
    const uint64_t codes = *reinterpret_cast<const uint64_t*>(src);
    KvPack16<T> pack;
#pragma unroll
    for (int i = 0; i < kSize; i += 2) {
      const float2 f = fp8x2_to_float2(static_cast<uint16_t>(codes >> (8 * i)));
      pack.v[i] = from_float<T>(f.x * scale);
      pack.v[i + 1] = from_float<T>(f.y * scale);
    }
    *reinterpret_cast<KvPack16<T>*>(dst) = pack;
  } else {
    *reinterpret_cast<KvPack16<T>*>(dst) = *reinterpret_cast<const KvPack16<T>*>(src);
  }
}

}  // namespace cbatch
