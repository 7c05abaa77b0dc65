// RoPE on q and k fused with the write of k and v into the paged KV cache. One block of 128 threads per
// token row: the row's cos/sin table (head_dim/2 angles) goes to shared memory, then threads stride over
// the (head, pair) rotations and over the v elements. Rotation in fp32: (a, b) -> (a cos - b sin,
// a sin + b cos) at angle = position * inv_freq[i]. Cache layout (num_blocks, num_kv_heads, block_size,
// head_dim): slot s lives in block s / block_size at offset s % block_size.
// The family build (RopeFamily) adds, in fp32 before the rotation: the q/k/v biases, and the RMSNorm of
// every q and k head (a warp per head sums its squares first, into shared memory); it picks the longrope
// table by position and scales cos and sin by the attention factor. Llama's build has none of it.
#include "cuda/rope_kv_cache.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <string>

#include "cuda/cuda_check.hpp"
#include "cuda/cuda_dtype.cuh"

namespace cbatch {

constexpr int kRopeThreads = 128;
constexpr int kRopeMaxHalf = 256;  // head_dim up to 512

// Offset of (slot, kv head) in one layer's cache.
__device__ __forceinline__ size_t cache_offset(int slot, int kv_head, int num_kv_heads, int block_size,
                                               int head_dim) {
  const size_t block = static_cast<size_t>(slot / block_size);
  const size_t offset = static_cast<size_t>(slot % block_size);
  return ((block * num_kv_heads + kv_head) * block_size + offset) * head_dim;
}

// 1 / rms of every q and k head of q_row (biases added first), a warp per head, into s_inv_rms.
template <typename T>
__device__ __forceinline__ void head_inv_rms(const T* q_row, const float* bias, int num_heads, int head_dim,
                                             float eps, float* s_inv_rms) {
  const int lane = threadIdx.x % 32;
  for (int head = threadIdx.x / 32; head < num_heads; head += blockDim.x / 32) {
    const T* src = q_row + static_cast<size_t>(head) * head_dim;
    float sum_sq = 0.0f;
    for (int d = lane; d < head_dim; d += 32) {
      const float v = to_float(src[d]) + (bias != nullptr ? bias[head * head_dim + d] : 0.0f);
      sum_sq += v * v;
    }
    sum_sq = warp_sum(sum_sq);
    if (lane == 0) s_inv_rms[head] = 1.0f / sqrtf(sum_sq / static_cast<float>(head_dim) + eps);
  }
}

template <typename T, bool FAMILY>
__global__ void __launch_bounds__(kRopeThreads)
    rope_kv_cache_kernel(T* __restrict__ qkv,                // (num_tokens, (nh + 2 nkv) * hd)
                         T* __restrict__ k_cache,            // (num_blocks, nkv, block_size, hd)
                         T* __restrict__ v_cache,            // (num_blocks, nkv, block_size, hd)
                         const int32_t* __restrict__ positions,  // (num_tokens)
                         const int32_t* __restrict__ slots,      // (num_tokens)
                         const float* __restrict__ inv_freq,     // (hd / 2)
                         int num_heads, int num_kv_heads, int head_dim, int block_size, bool halves,
                         const RopeFamily family) {              // FAMILY only
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
      s_sin[i] *= family.attention_factor;
      s_cos[i] *= family.attention_factor;
    }
  }
  extern __shared__ float s_inv_rms[];  // (nh + nkv) with the family's q/k norms
  if constexpr (FAMILY) {
    if (family.q_norm != nullptr) {
      const T* heads = qkv + static_cast<size_t>(row) * (num_heads + 2 * num_kv_heads) * head_dim;
      head_inv_rms(heads, family.qkv_bias, num_heads + num_kv_heads, head_dim, family.norm_eps, s_inv_rms);
    }
  }
  __syncthreads();

  const int slot = slots[row];
  T* q_row = qkv + static_cast<size_t>(row) * (num_heads + 2 * num_kv_heads) * head_dim;
  const T* v_row = q_row + static_cast<size_t>(num_heads + num_kv_heads) * head_dim;

  // Heads 0..nh-1 are q, nh..nh+nkv-1 are k (they follow q in the row).
  const int num_pairs = (num_heads + num_kv_heads) * half;
  for (int p = threadIdx.x; p < num_pairs; p += blockDim.x) {
    const int head = p / half;
    const int i = p % half;
    const int ia = halves ? i : 2 * i;
    const int ib = halves ? i + half : 2 * i + 1;
    const T* src = q_row + static_cast<size_t>(head) * head_dim;
    float a = to_float(src[ia]);
    float b = to_float(src[ib]);
    if constexpr (FAMILY) {
      if (family.qkv_bias != nullptr) {
        a += family.qkv_bias[head * head_dim + ia];
        b += family.qkv_bias[head * head_dim + ib];
      }
      if (family.q_norm != nullptr) {
        const float* w = head < num_heads ? family.q_norm : family.k_norm;
        const float inv_rms = s_inv_rms[head];
        a = a * inv_rms * w[ia];
        b = b * inv_rms * w[ib];
      }
    }
    const float c = s_cos[i];
    const float s = s_sin[i];
    const float ra = a * c - b * s;
    const float rb = a * s + b * c;
    if (head < num_heads) {
      T* dst = q_row + static_cast<size_t>(head) * head_dim;
      dst[ia] = from_float<T>(ra);
      dst[ib] = from_float<T>(rb);
    } else if (slot >= 0) {
      T* dst = k_cache + cache_offset(slot, head - num_heads, num_kv_heads, block_size, head_dim);
      dst[ia] = from_float<T>(ra);
      dst[ib] = from_float<T>(rb);
    }
  }
  if (slot < 0) return;  // padding row: computed, never stored
  const int kv_dim = num_kv_heads * head_dim;
  for (int j = threadIdx.x; j < kv_dim; j += blockDim.x) {
    const int kv_head = j / head_dim;
    T* dst = v_cache + cache_offset(slot, kv_head, num_kv_heads, block_size, head_dim) + j % head_dim;
    if constexpr (FAMILY) {
      const float* v_bias = family.qkv_bias;
      *dst = v_bias != nullptr ? from_float<T>(to_float(v_row[j]) + v_bias[(num_heads + num_kv_heads) * head_dim + j])
                               : v_row[j];
    } else {
      *dst = v_row[j];
    }
  }
}

template <typename T>
void rope_kv_cache(T* d_qkv, T* d_k_cache, T* d_v_cache, const int32_t* d_positions, const int32_t* d_slots,
                   const float* d_inv_freq, int num_tokens, const AttentionShape& shape, bool halves,
                   cudaStream_t stream, const RopeFamily& family) {
  const bool ok = num_tokens >= 0 && shape.num_heads > 0 && shape.num_kv_heads > 0 && shape.head_dim > 0 &&
                  shape.head_dim % 2 == 0 && shape.head_dim / 2 <= kRopeMaxHalf && shape.block_size > 0;
  if (!ok) {
    throw Error("rope_kv_cache: bad sizes num_tokens=" + std::to_string(num_tokens) + " num_heads=" +
                std::to_string(shape.num_heads) + " num_kv_heads=" + std::to_string(shape.num_kv_heads) +
                " head_dim=" + std::to_string(shape.head_dim) + " block_size=" + std::to_string(shape.block_size));
  }
  if ((family.q_norm == nullptr) != (family.k_norm == nullptr) ||
      (family.long_from != INT_MAX && family.long_inv_freq == nullptr)) {
    throw Error("rope_kv_cache: q and k norms come together, and a longrope threshold needs its table");
  }
  if (num_tokens == 0) return;
  if (family.is_plain()) {
    rope_kv_cache_kernel<T, false><<<num_tokens, kRopeThreads, 0, stream>>>(
        d_qkv, d_k_cache, d_v_cache, d_positions, d_slots, d_inv_freq, shape.num_heads, shape.num_kv_heads,
        shape.head_dim, shape.block_size, halves, family);
  } else {
    const size_t smem = family.q_norm != nullptr ? sizeof(float) * (shape.num_heads + shape.num_kv_heads) : 0;
    rope_kv_cache_kernel<T, true><<<num_tokens, kRopeThreads, smem, stream>>>(
        d_qkv, d_k_cache, d_v_cache, d_positions, d_slots, d_inv_freq, shape.num_heads, shape.num_kv_heads,
        shape.head_dim, shape.block_size, halves, family);
  }
  CUDA_CHECK_LAUNCH();
}

#define CBATCH_INSTANTIATE_ROPE(T)                                                                         \
  template void rope_kv_cache<T>(T*, T*, T*, const int32_t*, const int32_t*, const float*, int,            \
                                 const AttentionShape&, bool, cudaStream_t, const RopeFamily&);
CBATCH_INSTANTIATE_ROPE(float)
CBATCH_INSTANTIATE_ROPE(__nv_bfloat16)
CBATCH_INSTANTIATE_ROPE(__half)
#undef CBATCH_INSTANTIATE_ROPE

}  // namespace cbatch
