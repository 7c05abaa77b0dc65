// The argument block of the kernels over attention tiles (tile_attention.cuh: paged_attention.cu on CUDA
// cores, prefill_attention.cu on tensor cores) and the setup of a tile both kernels share: what a CTA covers,
// the keys its rows see and where a key lives in the paged cache. No CUDA include, so that the block code can
// also run on the host (paged_attention_block.cuh, tests/cuda/block_emulator.hpp): include it from .cu files
// or after the emulator.
#pragma once
#include <cstddef>
#include <cstdint>

#include "cuda/attention/attention_shape.hpp"

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

// What one CTA covers: tile blockIdx.x, rows [row_begin, row_begin + num_rows) of sequence seq, and kv head
// blockIdx.y, whose `group` q heads make the tile's num_items (row, q head) items: item it is row it / group
// of the tile and q head kv_head * group + it % group.
struct TileCta {
  int seq, row_begin, kv_head, num_rows, group, num_items;
  size_t qkv_stride;     // elements of a qkv row
  const int32_t* table;  // the sequence's block table
};

template <int HD, typename T, typename KV>
__device__ __forceinline__ TileCta tile_cta(const TileAttentionArgs<T, KV>& a) {
  TileCta c;
  c.seq = a.tile_seq[blockIdx.x];
  c.row_begin = a.tile_row[blockIdx.x];
  c.kv_head = blockIdx.y;
  c.num_rows = min(a.rows_per_tile, a.query_start[c.seq + 1] - c.row_begin);
  c.group = a.num_heads / a.num_kv_heads;
  c.num_items = c.num_rows * c.group;
  c.qkv_stride = static_cast<size_t>(a.num_heads + 2 * a.num_kv_heads) * HD;
  c.table = a.block_tables + static_cast<size_t>(c.seq) * a.max_blocks_per_seq;
  return c;
}

// An item's q vector in qkv and its output row in out.
template <int HD, typename T, typename KV>
__device__ __forceinline__ const T* tile_item_q(const TileAttentionArgs<T, KV>& a, const TileCta& c, int item) {
  const size_t row = static_cast<size_t>(c.row_begin + item / c.group);
  const int q_head = c.kv_head * c.group + item % c.group;
  return a.qkv + row * c.qkv_stride + static_cast<size_t>(q_head) * HD;
}
template <int HD, typename T, typename KV>
__device__ __forceinline__ T* tile_item_out(const TileAttentionArgs<T, KV>& a, const TileCta& c, int item) {
  const size_t row = static_cast<size_t>(c.row_begin + item / c.group);
  const int q_head = c.kv_head * c.group + item % c.group;
  return a.out + row * a.num_heads * HD + static_cast<size_t>(q_head) * HD;
}

// The keys the tile's rows see, first..last: last the latest of the positions pos[0], pos[stride], ...
// below pos[count] (a row's position every stride entries), first 0, or in the family build the first key
// of the earliest row's window.
struct TileKeys {
  int first, last;
};

template <bool FAMILY>
__device__ __forceinline__ TileKeys tile_keys(const int* pos, int count, int stride, int window) {
  int max_pos = 0;
  for (int i = 0; i < count; i += stride) max_pos = max(max_pos, pos[i]);
  int key_start = 0;  // the family build: the first key of the tile's earliest window
  if constexpr (FAMILY) {
    int min_pos = max_pos;
    for (int i = 0; i < count; i += stride) min_pos = min(min_pos, pos[i]);
    key_start = window_first_key(min_pos, window);
  }
  return TileKeys{key_start, max_pos};
}

// Where cache position pos of the tile's sequence starts for the CTA's kv head (elements, the layout above).
template <int HD, typename T, typename KV>
__device__ __forceinline__ size_t tile_cache_offset(const TileAttentionArgs<T, KV>& a, const TileCta& c, int pos) {
  const size_t block = static_cast<size_t>(c.table[pos / a.block_size]);
  return ((block * a.num_kv_heads + c.kv_head) * a.block_size + pos % a.block_size) * HD;
}

}  // namespace cbatch
