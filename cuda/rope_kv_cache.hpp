// Host launcher of RoPE fused with the paged K/V cache write (rope_kv_cache.cu).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/attention_shape.hpp"

namespace cbatch {

// For every row r: rotates the q heads of qkv in place and writes the rotated k heads and the v heads
// of row r into the cache at slot slots[r] (nothing is stored when slots[r] == -1).
//   qkv (num_tokens, (num_heads + 2 * num_kv_heads) * head_dim) T: q heads, k heads, v heads
//   k_cache, v_cache (num_blocks, num_kv_heads, block_size, head_dim) T, one layer
//   positions, slots (num_tokens); inv_freq (head_dim / 2) fp32 from rope_inv_freq
// halves: RopeLayout::kHalves pairs (i, i + head_dim/2), else adjacent pairs (2i, 2i+1).
// Slots must lie in [-1, num_blocks * block_size): the caller validates them on the host.
template <typename T>
void rope_kv_cache(T* d_qkv, T* d_k_cache, T* d_v_cache, const int32_t* d_positions, const int32_t* d_slots,
                   const float* d_inv_freq, int num_tokens, const AttentionShape& shape, bool halves,
                   cudaStream_t stream);

}  // namespace cbatch
