// Host side of the paged attention over a ragged batch (paged_attention.cu): the launcher; the host-built
// tile list it consumes is attention_tiles.hpp's.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "cuda/attention/attention_shape.hpp"
#include "cuda/attention/kv_cache_dtype.hpp"

namespace cbatch {

// Dynamic shared memory of a paged_attention CTA at head_dim (140 KB at 256: more than some GPUs allow).
size_t paged_attention_smem_bytes(int head_dim);

// out (num_tokens, num_heads * head_dim) T: for every row r of sequence s and q head h, softmax-weighted
// sum of the v of s at cache positions first..positions[r], with scores q.k * scale (softcapped), kv head
// h / (num_heads / num_kv_heads), as `scoring` says (attention_shape.hpp; default: first = 0, scale
// 1 / sqrt(head_dim), no softcap). Reads q from qkv (num_tokens, (num_heads + 2 * num_kv_heads) *
// head_dim), already rotated; k and v only from the cache (num_blocks, shape.block_heads(), block_size,
// head_dim), into which this step's rows were written before. block_tables (num_seqs,
// max_blocks_per_seq); query_start (num_seqs + 1); positions (num_tokens); tile_seq, tile_row (num_tiles)
// from build_attention_tiles with paged_attention_rows_per_tile(shape) (attention_tiles.hpp: shape.tile_rows
// where the list was cut for another shape). head_dim: a multiple of 16 up to 128, kWideHeadDim or
// kWidestHeadDim. Block table entries for positions 0..positions[r] must be
// valid blocks (host-validated). KV: the cache element, T or (T = bf16, fp16) Fp8E4M3 with the layer's
// scales (kv_cache_dtype.hpp), dequantized to fp32 as it is read.
template <typename T, typename KV = T>
void paged_attention(T* d_out, const T* d_qkv, const KV* d_k_cache, const KV* d_v_cache, const int32_t* d_positions,
                     const int32_t* d_query_start, const int32_t* d_block_tables, int max_blocks_per_seq,
                     const int32_t* d_tile_seq, const int32_t* d_tile_row, int num_tiles,
                     const AttentionShape& shape, cudaStream_t stream, const AttentionScoring& scoring = {},
                     const KvScales& scales = {});

}  // namespace cbatch
