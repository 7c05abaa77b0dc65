// Host side of the tensor-core attention for prefill chunks (prefill_attention.cu): the same contract,
// arguments and tile list as paged_attention (paged_attention.hpp), for 16-bit T only (bf16, fp16), with
// Q K^T and P V on the tensor cores. The long prompts of a batch spend most of their attention time here.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/attention/attention_shape.hpp"
#include "cuda/attention/kv_cache_dtype.hpp"

namespace cbatch {

// As paged_attention<T, KV>, for T in {__nv_bfloat16, __half}; probabilities are rounded to T before P V,
// and an FP8 cache's values (times the scale) to T before both products.
template <typename T, typename KV = T>
void prefill_attention(T* d_out, const T* d_qkv, const KV* d_k_cache, const KV* d_v_cache, const int32_t* d_positions,
                       const int32_t* d_query_start, const int32_t* d_block_tables, int max_blocks_per_seq,
                       const int32_t* d_tile_seq, const int32_t* d_tile_row, int num_tiles,
                       const AttentionShape& shape, cudaStream_t stream, const AttentionScoring& scoring = {},
                       const KvScales& scales = {});

}  // namespace cbatch
