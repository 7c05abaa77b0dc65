// The argument block of the kernels over attention tiles (tile_attention.cuh), with no CUDA include so that
// their block code can also run on the host (paged_attention_block.cuh, tests/cuda/block_emulator.hpp).
#pragma once
#include <cstdint>

namespace cbatch {

// KV: the cache element, T or Fp8E4M3 (kv_cache_dtype.hpp), whose scales k_scale and v_scale point to.
template <typename T, typename KV = T>
struct TileAttentionArgs {
  T* out;                       // (num_tokens, num_heads * hd)
  const T* qkv;                 // (num_tokens, (num_heads + 2 * num_kv_heads) * hd)
  const KV* k_cache;            // (num_blocks, num_kv_heads, block_size, hd)
  const KV* v_cache;            // (num_blocks, num_kv_heads, block_size, hd)
  const int32_t* positions;     // (num_tokens)
  const int32_t* query_start;   // (num_seqs + 1)
  const int32_t* block_tables;  // (num_seqs, max_blocks_per_seq)
  const int32_t* tile_seq;      // (num_tiles)
  const int32_t* tile_row;      // (num_tiles)
  int max_blocks_per_seq;
  int num_heads;
  int num_kv_heads;
  int block_size;
  int rows_per_tile;
  float scale;
  float softcap;                // the family build's (AttentionScoring)
  int window;
  const float* k_scale;         // (1) an FP8 cache's; null otherwise
  const float* v_scale;         // (1)
  const float* sinks;           // (num_heads) the family build's sink logits (AttentionScoring); null: none
};

}  // namespace cbatch
