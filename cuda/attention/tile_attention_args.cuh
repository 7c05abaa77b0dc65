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
  const KV* k_cache;            // (num_blocks, cache_heads, block_size, hd)
  const KV* v_cache;            // (num_blocks, cache_heads, block_size, hd)
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
  int cache_heads = 0;          // heads' room in a cache block (AttentionShape::cache_heads); 0: num_kv_heads
};

// What one CTA covers: tile blockIdx.x, rows [row_begin, row_begin + num_rows) of sequence seq, and kv head
// blockIdx.y, whose `group` q heads make the tile's num_rows * group (row, q head) items: item it is row
// it / group of the tile and q head kv_head * group + it % group. A kernel whose CTA serves ITEMS items takes
// slice blockIdx.z of them: the CTA's items 0..num_items-1 are the tile's item0.. (num_items may be 0: a
// tile of fewer rows than the list's tile_rows).
struct TileCta {
  int seq, row_begin, kv_head, num_rows, group;
  int item0, num_items;  // the CTA's slice of the tile's items
  size_t qkv_stride;     // elements of a qkv row
  const int32_t* table;  // the sequence's block table

  // The tile row and the q head of the CTA's item it.
  __device__ __forceinline__ int row_of(int it) const { return (item0 + it) / group; }
  __device__ __forceinline__ int q_head_of(int it) const { return kv_head * group + (item0 + it) % group; }
};

template <int HD, int ITEMS, typename T, typename KV>
__device__ __forceinline__ TileCta tile_cta(const TileAttentionArgs<T, KV>& a) {
  TileCta c;
  c.seq = a.tile_seq[blockIdx.x];
  c.row_begin = a.tile_row[blockIdx.x];
  c.kv_head = blockIdx.y;
  c.num_rows = min(a.rows_per_tile, a.query_start[c.seq + 1] - c.row_begin);
  c.group = a.num_heads / a.num_kv_heads;
  c.item0 = static_cast<int>(blockIdx.z) * ITEMS;
  c.num_items = max(0, min(ITEMS, c.num_rows * c.group - c.item0));
  c.qkv_stride = static_cast<size_t>(a.num_heads + 2 * a.num_kv_heads) * HD;
  c.table = a.block_tables + static_cast<size_t>(c.seq) * a.max_blocks_per_seq;
  return c;
}

// The CTA's item's q vector in qkv and its output row in out.
template <int HD, typename T, typename KV>
__device__ __forceinline__ const T* tile_item_q(const TileAttentionArgs<T, KV>& a, const TileCta& c, int item) {
  const size_t row = static_cast<size_t>(c.row_begin + c.row_of(item));
  return a.qkv + row * c.qkv_stride + static_cast<size_t>(c.q_head_of(item)) * HD;
}
template <int HD, typename T, typename KV>
__device__ __forceinline__ T* tile_item_out(const TileAttentionArgs<T, KV>& a, const TileCta& c, int item) {
  const size_t row = static_cast<size_t>(c.row_begin + c.row_of(item));
  return a.out + row * a.num_heads * HD + static_cast<size_t>(c.q_head_of(item)) * HD;
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
  const int block_heads = a.cache_heads > 0 ? a.cache_heads : a.num_kv_heads;
  return ((block * block_heads + c.kv_head) * a.block_size + pos % a.block_size) * HD;
}

}  // namespace cbatch
