// Host launcher of RoPE fused with the paged K/V cache write (rope_kv_cache.cu); the family's additions
// to it (q/k/v biases, q/k norms, the longrope table, the attention factor) are rope_family.hpp's.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/attention/attention_shape.hpp"
#include "cuda/attention/kv_cache_dtype.hpp"
#include "cuda/attention/rope_family.hpp"

namespace cbatch {

// For every row r: rotates the q heads of qkv in place and writes the rotated k heads and the v heads
// of row r into the cache at slot slots[r] (nothing is stored when slots[r] == -1).
//   qkv (num_tokens, (num_heads + 2 * num_kv_heads) * head_dim) T: q heads, k heads, v heads
//   k_cache, v_cache (num_blocks, shape.block_heads(), block_size, head_dim) T, one layer (heads past
//   num_kv_heads untouched)
//   positions, slots (num_tokens); inv_freq (head_dim / 2) fp32 from rope_inv_freq (the layer's table)
// halves: RopeLayout::kHalves pairs (i, i + head_dim/2), else adjacent pairs (2i, 2i+1).
// family: biases, q/k norms, longrope table and attention factor (rope_family.hpp), all in fp32 before the
// one rounding of each output to T.
// Slots must lie in [-1, num_blocks * block_size): the caller validates them on the host.
// KV: the cache element, T or Fp8E4M3 (T = bf16 or fp16 only; scales required): an FP8 cache gets each
// fp32 k and v value (before any rounding to T) as fp8_e4m3_from_float(value / scale).
template <typename T, typename KV = T>
void rope_kv_cache(T* d_qkv, KV* d_k_cache, KV* d_v_cache, const int32_t* d_positions, const int32_t* d_slots,
                   const float* d_inv_freq, int num_tokens, const AttentionShape& shape, bool halves,
                   cudaStream_t stream, const RopeFamily& family = {}, const KvScales& scales = {});

}  // namespace cbatch
