// Reading and writing paged-cache elements of type KV in the kernels: KV is the compute type T (read and
// written as it is) or Fp8E4M3 (kv_cache_dtype.hpp), dequantized to fp32 times the layer's scale on every
// read and quantized as value / scale with fp8.hpp's rounding (nearest even, saturating) on every write,
// the same arithmetic on the GPU, in the block emulator and in the tests' reference. It uses no CUDA header
// of its own: include it after cuda_dtype.cuh (to_float, from_float, Pack16), or on the host after
// tests/cuda/block_emulator.hpp and then cuda_dtype.cuh.
#pragma once
#include <cstdint>

#include "cuda/kv_cache_dtype.hpp"
#include "engine/model/fp8.hpp"

namespace cbatch {

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
__device__ __forceinline__ float kv_to_float(KV v, float scale) {
  if constexpr (kFp8Kv<KV>) {
    return fp8_e4m3_to_float(v) * scale;
  } else {
    return to_float(v);
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

// Pack16<KV>::kSize cache elements (16 bytes, 16-byte aligned) widened to fp32: 4 floats, 8 bf16/fp16 or
// 16 FP8 codes (times the scale).
template <typename KV>
__device__ __forceinline__ void load_kv_pack_f32(const KV* src, float* dst, float scale) {
  const Pack16<KV> pack = *reinterpret_cast<const Pack16<KV>*>(src);
#pragma unroll
  for (int i = 0; i < Pack16<KV>::kSize; ++i) dst[i] = kv_to_float(pack.v[i], scale);
}

// Pack16<T>::kSize consecutive cache elements as T (the tensor-core kernels' operand type), into a 16-byte
// aligned dst: a plain 16-byte copy where KV is T, else 16 / sizeof(T) FP8 codes (8-byte aligned)
// dequantized and rounded to T (exact where the scale is 1: every E4M3 value is a bf16 and an fp16 value).
template <typename T, typename KV>
__device__ __forceinline__ void load_kv_pack_as(T* dst, const KV* src, float scale) {
  if constexpr (kFp8Kv<KV>) {
    constexpr int kSize = Pack16<T>::kSize;
    static_assert(kSize == 8, "FP8 caches serve 16-bit compute types");
    const uint64_t codes = *reinterpret_cast<const uint64_t*>(src);
    Pack16<T> pack;
#pragma unroll
    for (int i = 0; i < kSize; ++i) {
      pack.v[i] = from_float<T>(fp8_e4m3_to_float(static_cast<uint8_t>(codes >> (8 * i))) * scale);
    }
    *reinterpret_cast<Pack16<T>*>(dst) = pack;
  } else {
    *reinterpret_cast<Pack16<T>*>(dst) = *reinterpret_cast<const Pack16<T>*>(src);
  }
}

}  // namespace cbatch
