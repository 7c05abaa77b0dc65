// The block code of RoPE fused with the paged K/V cache write (rope_kv_cache.cu, whose header describes
// it). It uses no CUDA header of its own: include it after cuda_dtype.cuh (to_float, from_float, warp_sum),
// or on the host after tests/cuda/block_emulator.hpp and then cuda_dtype.cuh, which the emulator turns into
// host code (tests/cuda/test_elementwise_emulated.cpp).
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "cuda/attention/kv_cache_element.cuh"
#include "cuda/attention/rope_family.hpp"

namespace cbatch::rope_detail {

constexpr int kRopeThreads = 128;
constexpr int kRopeMaxHalf = 256;  // head_dim up to 512

// Offset of (slot, kv head) in one layer's cache of block_heads heads' room a block.
__device__ __forceinline__ size_t cache_offset(int slot, int kv_head, int block_heads, int block_size,
                                               int head_dim) {
  const size_t block = static_cast<size_t>(slot / block_size);
  const size_t offset = static_cast<size_t>(slot % block_size);
  return ((block * block_heads + kv_head) * block_size + offset) * head_dim;
}

// The sum of squares of every q and k head of q_row (biases added first), a warp per head, into s_sum_sq.
template <typename T>
__device__ __forceinline__ void head_sum_sq(const T* q_row, const float* bias, int num_heads, int head_dim,
                                            float* s_sum_sq) {
  const int lane = threadIdx.x % 32;
  for (int head = threadIdx.x / 32; head < num_heads; head += blockDim.x / 32) {
    const T* src = q_row + static_cast<size_t>(head) * head_dim;
    float sum_sq = 0.0f;
    for (int d = lane; d < head_dim; d += 32) {
      const float v = to_float(src[d]) + (bias != nullptr ? bias[head * head_dim + d] : 0.0f);
      sum_sq += v * v;
    }
    sum_sq = warp_sum(sum_sq);
    if (lane == 0) s_sum_sq[head] = sum_sq;
  }
}

// s (nh + nkv head sums of squares) becomes the q/k norms' 1 / rms: one per head, or with
// family.qk_norm_whole s[0] over all q heads and s[1] over all k heads (summed in head order).
__device__ __forceinline__ void inv_rms_from_sums(float* s, int num_heads, int num_kv_heads, int head_dim,
                                                  const RopeFamily& family) {
  __syncthreads();  // every head's sum written
  if (!family.qk_norm_whole) {
    for (int h = threadIdx.x; h < num_heads + num_kv_heads; h += blockDim.x) {
      s[h] = 1.0f / sqrtf(s[h] / static_cast<float>(head_dim) + family.norm_eps);
    }
    return;
  }
  if (threadIdx.x == 0) {
    float q_sum = 0.0f, k_sum = 0.0f;
    for (int h = 0; h < num_heads; ++h) q_sum += s[h];
    for (int h = 0; h < num_kv_heads; ++h) k_sum += s[num_heads + h];
    s[0] = 1.0f / sqrtf(q_sum / static_cast<float>(num_heads * head_dim) + family.norm_eps);
    s[1] = 1.0f / sqrtf(k_sum / static_cast<float>(num_kv_heads * head_dim) + family.norm_eps);
  }
}

// The body of rope_kv_cache_kernel (arguments as the kernel's); s_inv_rms: (nh + 2 nkv) floats of dynamic
// shared memory where the family build has q/k norms or the V norm (the v heads' after the q and k heads').
// KV: the cache element (kv_cache_element.cuh); an FP8 cache gets each fp32 k and v value divided by its
// scale and rounded once (no rounding to T first).
template <typename T, bool FAMILY, typename KV = T>
__device__ __forceinline__ void rope_kv_cache_block(T* __restrict__ qkv, KV* __restrict__ k_cache,
                                                    KV* __restrict__ v_cache, const int32_t* __restrict__ positions,
                                                    const int32_t* __restrict__ slots,
                                                    const float* __restrict__ inv_freq, int num_heads,
                                                    int num_kv_heads, int head_dim, int block_size, bool halves,
                                                    const RopeFamily& family, float* s_inv_rms,
                                                    const KvScales& scales = {}, int cache_heads = 0) {
  const int block_heads = cache_heads > 0 ? cache_heads : num_kv_heads;  // heads' room in a cache block
  __shared__ float s_cos[kRopeMaxHalf];  // (hd / 2)
  __shared__ float s_sin[kRopeMaxHalf];  // (hd / 2)
  const int row = blockIdx.x;
  const int half = head_dim / 2;
  const float pos = static_cast<float>(positions[row]);
  const float* freq = inv_freq;
  if constexpr (FAMILY) {
    if (positions[row] >= family.long_from) freq = family.long_inv_freq;
  }
  for (int i = threadIdx.x; i < half; i += blockDim.x) {
    const float angle = pos * freq[i];
    sincosf(angle, &s_sin[i], &s_cos[i]);
    if constexpr (FAMILY) {
      s_sin[i] = family.rotates ? s_sin[i] * family.attention_factor : 0.0f;  // NoPE: the identity rotation
      s_cos[i] = family.rotates ? s_cos[i] * family.attention_factor : 1.0f;
    }
  }
  // A layer that stores no K/V rotates its q heads alone (its k and v heads are not read).
  const int cached_heads = FAMILY && !family.stores_kv ? 0 : num_kv_heads;
  if constexpr (FAMILY) {
    const T* heads = qkv + static_cast<size_t>(row) * (num_heads + 2 * num_kv_heads) * head_dim;
    if (family.q_norm != nullptr) {
      head_sum_sq(heads, family.qkv_bias, num_heads + cached_heads, head_dim, s_inv_rms);
      inv_rms_from_sums(s_inv_rms, num_heads, cached_heads, head_dim, family);
    }
    if (family.value_norm && cached_heads > 0) {  // the v heads' 1 / rms at s_inv_rms[nh + nkv ..)
      const size_t v_at = static_cast<size_t>(num_heads + num_kv_heads) * head_dim;
      float* s_v = s_inv_rms + num_heads + num_kv_heads;
      head_sum_sq(heads + v_at, family.qkv_bias != nullptr ? family.qkv_bias + v_at : nullptr, num_kv_heads,
                  head_dim, s_v);
      __syncthreads();
      for (int h = threadIdx.x; h < num_kv_heads; h += blockDim.x) {
        s_v[h] = 1.0f / sqrtf(s_v[h] / static_cast<float>(head_dim) + family.norm_eps);
      }
    }
  }
  __syncthreads();

  const int slot = slots[row];
  T* q_row = qkv + static_cast<size_t>(row) * (num_heads + 2 * num_kv_heads) * head_dim;
  const T* v_row = q_row + static_cast<size_t>(num_heads + num_kv_heads) * head_dim;

  // Heads 0..nh-1 are q, nh..nh+nkv-1 are k (they follow q in the row).
  // Partial rotary: pairs i < rotated pair dims within the head's first 2 rotated dims (halves: i and
  // i + rotated); the dims past them are paired in place and keep their values.
  int rotated = half;
  if constexpr (FAMILY) {
    if (family.rotary_half > 0) rotated = family.rotary_half;
  }
  const int num_pairs = (num_heads + cached_heads) * half;
  for (int p = threadIdx.x; p < num_pairs; p += blockDim.x) {
    const int head = p / half;
    const int i = p % half;
    const bool rotates = i < rotated;
    const int ia = !rotates ? 2 * i : halves ? i : 2 * i;
    const int ib = !rotates ? 2 * i + 1 : halves ? i + rotated : 2 * i + 1;
    const T* src = q_row + static_cast<size_t>(head) * head_dim;
    float a = to_float(src[ia]);
    float b = to_float(src[ib]);
    if constexpr (FAMILY) {
      if (family.qkv_bias != nullptr) {
        a += family.qkv_bias[head * head_dim + ia];
        b += family.qkv_bias[head * head_dim + ib];
      }
      if (family.q_norm != nullptr) {
        const bool is_q = head < num_heads;
        const float* w = is_q ? family.q_norm : family.k_norm;
        if (family.qk_norm_whole) w += static_cast<size_t>(is_q ? head : head - num_heads) * head_dim;
        const float inv_rms = family.qk_norm_whole ? s_inv_rms[is_q ? 0 : 1] : s_inv_rms[head];
        a = a * inv_rms * w[ia];
        b = b * inv_rms * w[ib];
      }
    }
    const float c = rotates ? s_cos[i] : 1.0f;
    const float s = rotates ? s_sin[i] : 0.0f;
    const float ra = a * c - b * s;
    const float rb = a * s + b * c;
    if (head < num_heads) {
      T* dst = q_row + static_cast<size_t>(head) * head_dim;
      dst[ia] = from_float<T>(ra);
      dst[ib] = from_float<T>(rb);
    } else if (slot >= 0) {
      const float k_scale = kv_scale<KV>(scales.k);
      KV* dst = k_cache + cache_offset(slot, head - num_heads, block_heads, block_size, head_dim);
      dst[ia] = kv_from_float<KV>(ra, k_scale);
      dst[ib] = kv_from_float<KV>(rb, k_scale);
    }
  }
  if (slot < 0 || cached_heads == 0) return;  // padding row: computed, never stored; or a shared layer
  const int kv_dim = num_kv_heads * head_dim;
  const float v_scale = kv_scale<KV>(scales.v);
  for (int j = threadIdx.x; j < kv_dim; j += blockDim.x) {
    const int kv_head = j / head_dim;
    KV* dst = v_cache + cache_offset(slot, kv_head, block_heads, block_size, head_dim) + j % head_dim;
    const float* v_bias = FAMILY ? family.qkv_bias : nullptr;
    const bool v_norm = FAMILY && family.value_norm;
    if (v_bias != nullptr || v_norm) {
      float value = to_float(v_row[j]) + (v_bias != nullptr ? v_bias[(num_heads + num_kv_heads) * head_dim + j] : 0.0f);
      if (v_norm) value *= s_inv_rms[num_heads + num_kv_heads + kv_head];
      *dst = kv_from_float<KV>(value, v_scale);
    } else if constexpr (!std::is_same_v<KV, T>) {  // FP8 (or the tests' fp32 copy of a 16-bit row)
      *dst = kv_from_float<KV>(to_float(v_row[j]), v_scale);
    } else {
      *dst = v_row[j];  // copied as it is
    }
  }
}

}  // namespace cbatch::rope_detail
