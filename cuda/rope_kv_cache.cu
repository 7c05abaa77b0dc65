// RoPE on q and k fused with the write of k and v into the paged KV cache. One block of 128 threads per
// token row: the row's cos/sin table (head_dim/2 angles) goes to shared memory, then threads stride over
// the (head, pair) rotations and over the v elements. Rotation in fp32: (a, b) -> (a cos - b sin,
// a sin + b cos) at angle = position * inv_freq[i]. Cache layout (num_blocks, num_kv_heads, block_size,
// head_dim): slot s lives in block s / block_size at offset s % block_size.
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

template <typename T>
__global__ void __launch_bounds__(kRopeThreads)
    rope_kv_cache_kernel(T* __restrict__ qkv,                // (num_tokens, (nh + 2 nkv) * hd)
                         T* __restrict__ k_cache,            // (num_blocks, nkv, block_size, hd)
                         T* __restrict__ v_cache,            // (num_blocks, nkv, block_size, hd)
                         const int32_t* __restrict__ positions,  // (num_tokens)
                         const int32_t* __restrict__ slots,      // (num_tokens)
                         const float* __restrict__ inv_freq,     // (hd / 2)
                         int num_heads, int num_kv_heads, int head_dim, int block_size, bool halves) {
  __shared__ float s_cos[kRopeMaxHalf];  // (hd / 2)
  __shared__ float s_sin[kRopeMaxHalf];  // (hd / 2)
  const int row = blockIdx.x;
  const int half = head_dim / 2;
  const float pos = static_cast<float>(positions[row]);
  for (int i = threadIdx.x; i < half; i += blockDim.x) {
    const float angle = pos * inv_freq[i];
    sincosf(angle, &s_sin[i], &s_cos[i]);
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
    const float a = to_float(src[ia]);
    const float b = to_float(src[ib]);
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
    v_cache[cache_offset(slot, kv_head, num_kv_heads, block_size, head_dim) + j % head_dim] = v_row[j];
  }
}

template <typename T>
void rope_kv_cache(T* d_qkv, T* d_k_cache, T* d_v_cache, const int32_t* d_positions, const int32_t* d_slots,
                   const float* d_inv_freq, int num_tokens, const AttentionShape& shape, bool halves,
                   cudaStream_t stream) {
  const bool ok = num_tokens >= 0 && shape.num_heads > 0 && shape.num_kv_heads > 0 && shape.head_dim > 0 &&
                  shape.head_dim % 2 == 0 && shape.head_dim / 2 <= kRopeMaxHalf && shape.block_size > 0;
  if (!ok) {
    throw Error("rope_kv_cache: bad sizes num_tokens=" + std::to_string(num_tokens) + " num_heads=" +
                std::to_string(shape.num_heads) + " num_kv_heads=" + std::to_string(shape.num_kv_heads) +
                " head_dim=" + std::to_string(shape.head_dim) + " block_size=" + std::to_string(shape.block_size));
  }
  if (num_tokens == 0) return;
  rope_kv_cache_kernel<T><<<num_tokens, kRopeThreads, 0, stream>>>(
      d_qkv, d_k_cache, d_v_cache, d_positions, d_slots, d_inv_freq, shape.num_heads, shape.num_kv_heads,
      shape.head_dim, shape.block_size, halves);
  CUDA_CHECK_LAUNCH();
}

#define CBATCH_INSTANTIATE_ROPE(T)                                                                         \
  template void rope_kv_cache<T>(T*, T*, T*, const int32_t*, const int32_t*, const float*, int,            \
                                 const AttentionShape&, bool, cudaStream_t);
CBATCH_INSTANTIATE_ROPE(float)
CBATCH_INSTANTIATE_ROPE(__nv_bfloat16)
CBATCH_INSTANTIATE_ROPE(__half)
#undef CBATCH_INSTANTIATE_ROPE

}  // namespace cbatch
