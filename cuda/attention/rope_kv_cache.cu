// RoPE on q and k fused with the write of k and v into the paged KV cache. One block of 128 threads per
// token row: the row's cos/sin table (head_dim/2 angles) goes to shared memory, then threads stride over
// the (head, pair) rotations and over the v elements. Rotation in fp32: (a, b) -> (a cos - b sin,
// a sin + b cos) at angle = position * inv_freq[i]. Cache layout (num_blocks, cache_heads, block_size,
// head_dim): slot s lives in block s / block_size at offset s % block_size.
// The family build (RopeFamily) adds, in fp32 before the rotation: the q/k/v biases, and the RMSNorm of
// every q and k head (a warp per head sums its squares first, into shared memory) and of every v head
// without weights (Gemma 4's V norm); a layer that reads another's K/V has its q heads rotated and stores
// nothing (RopeFamily::stores_kv); it picks the longrope
// table by position and scales cos and sin by the attention factor. Llama's build has none of it. With an
// FP8 cache (KV = Fp8E4M3) k and v are stored as E4M3 codes of value / scale (kv_cache_element.cuh). The
// block code is in rope_kv_cache_block.cuh.
#include "cuda/attention/rope_kv_cache.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <climits>
#include <string>

#include "cuda/common/cuda_check.hpp"
#include "cuda/common/cuda_dtype.cuh"
#include "cuda/attention/rope_kv_cache_block.cuh"

namespace cbatch {

using namespace rope_detail;

template <typename T, bool FAMILY, typename KV>
__global__ void __launch_bounds__(kRopeThreads)
    rope_kv_cache_kernel(T* __restrict__ qkv,                // (num_tokens, (nh + 2 nkv) * hd)
                         KV* __restrict__ k_cache,           // (num_blocks, cache_heads, block_size, hd)
                         KV* __restrict__ v_cache,           // (num_blocks, cache_heads, block_size, hd)
                         const int32_t* __restrict__ positions,  // (num_tokens)
                         const int32_t* __restrict__ slots,      // (num_tokens)
                         const float* __restrict__ inv_freq,     // (hd / 2)
                         int num_heads, int num_kv_heads, int head_dim, int block_size, bool halves,
                         const RopeFamily family,                // FAMILY only
                         const KvScales scales,                  // FP8 caches only
                         int cache_heads) {                      // heads' room in a cache block
  extern __shared__ float s_inv_rms[];  // (nh + 2 nkv) with the family's q/k norms or V norm
  rope_kv_cache_block<T, FAMILY, KV>(qkv, k_cache, v_cache, positions, slots, inv_freq, num_heads, num_kv_heads,
                                     head_dim, block_size, halves, family, s_inv_rms, scales, cache_heads);
}

template <typename T, typename KV>
void rope_kv_cache(T* d_qkv, KV* d_k_cache, KV* d_v_cache, const int32_t* d_positions, const int32_t* d_slots,
                   const float* d_inv_freq, int num_tokens, const AttentionShape& shape, bool halves,
                   cudaStream_t stream, const RopeFamily& family, const KvScales& scales) {
  const bool ok = num_tokens >= 0 && shape.num_heads > 0 && shape.num_kv_heads > 0 && shape.head_dim > 0 &&
                  shape.head_dim % 2 == 0 && shape.head_dim / 2 <= kRopeMaxHalf && shape.block_size > 0 &&
                  shape.block_heads() >= shape.num_kv_heads;
  if (!ok) {
    throw Error("rope_kv_cache: bad sizes num_tokens=" + std::to_string(num_tokens) + " num_heads=" +
                std::to_string(shape.num_heads) + " num_kv_heads=" + std::to_string(shape.num_kv_heads) +
                " head_dim=" + std::to_string(shape.head_dim) + " block_size=" + std::to_string(shape.block_size));
  }
  if ((family.q_norm == nullptr) != (family.k_norm == nullptr) ||
      (family.long_from != INT_MAX && family.long_inv_freq == nullptr)) {
    throw Error("rope_kv_cache: q and k norms come together, and a longrope threshold needs its table");
  }
  if (kFp8Kv<KV> && (scales.k == nullptr || scales.v == nullptr)) {
    throw Error("rope_kv_cache: an FP8 cache needs the layer's k and v scales");
  }
  if (num_tokens == 0) return;
  if (family.is_plain()) {
    rope_kv_cache_kernel<T, false, KV><<<num_tokens, kRopeThreads, 0, stream>>>(
        d_qkv, d_k_cache, d_v_cache, d_positions, d_slots, d_inv_freq, shape.num_heads, shape.num_kv_heads,
        shape.head_dim, shape.block_size, halves, family, scales, shape.block_heads());
  } else {
    const bool norms = family.q_norm != nullptr || family.value_norm;
    const size_t smem = norms ? sizeof(float) * (shape.num_heads + 2 * shape.num_kv_heads) : 0;
    rope_kv_cache_kernel<T, true, KV><<<num_tokens, kRopeThreads, smem, stream>>>(
        d_qkv, d_k_cache, d_v_cache, d_positions, d_slots, d_inv_freq, shape.num_heads, shape.num_kv_heads,
        shape.head_dim, shape.block_size, halves, family, scales, shape.block_heads());
  }
  CUDA_CHECK_LAUNCH();
}

#define CBATCH_INSTANTIATE_ROPE(T, KV)                                                                     \
  template void rope_kv_cache<T, KV>(T*, KV*, KV*, const int32_t*, const int32_t*, const float*, int,      \
                                     const AttentionShape&, bool, cudaStream_t, const RopeFamily&,         \
                                     const KvScales&);
CBATCH_INSTANTIATE_ROPE(float, float)
CBATCH_INSTANTIATE_ROPE(__nv_bfloat16, __nv_bfloat16)
CBATCH_INSTANTIATE_ROPE(__half, __half)
CBATCH_INSTANTIATE_ROPE(__nv_bfloat16, Fp8E4M3)
CBATCH_INSTANTIATE_ROPE(__half, Fp8E4M3)
#undef CBATCH_INSTANTIATE_ROPE

}  // namespace cbatch
