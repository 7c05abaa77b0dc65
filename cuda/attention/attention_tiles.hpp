// The tile list of the attention kernels over attention tiles (paged_attention.cu on CUDA cores,
// prefill_attention.cu on tensor cores; attention_tiles.cpp): how a sequence's query rows are cut into
// tiles, the head dims and GQA groups those kernels take, and the host check of a launch's sizes.
#pragma once
#include <cstdint>

#include "cuda/attention/attention_shape.hpp"

namespace cbatch {

// (row, q-head) pairs one CTA serves; a tile holds this many pairs divided by the GQA group size rows.
constexpr int kAttentionItemsPerTile = 64;

// Query rows per tile: shape.tile_rows where set, else kAttentionItemsPerTile / (num_heads / num_kv_heads), at
// least 1. A tile of a layer whose GQA group is larger than its list's was built for holds more than
// kAttentionItemsPerTile items: the kernels cut them into slices of their own item count, one CTA each
// (attention_tile_slices).
int paged_attention_rows_per_tile(const AttentionShape& shape);

// CTAs (grid z) per (tile, kv head) of a kernel whose CTA serves items_per_cta (row, q head) items: the
// tile's rows times the group, cut into slices of items_per_cta.
int attention_tile_slices(const AttentionShape& shape, int items_per_cta);

// Splits every sequence's rows [query_start[s], query_start[s+1]) into tiles of at most rows_per_tile
// rows: tile t covers rows [tile_row[t], min(tile_row[t] + rows_per_tile, query_start[s+1])) of sequence
// tile_seq[t]. Writes at most num_tokens tiles and returns their number. Host memory.
int build_attention_tiles(const int32_t* query_start, int num_seqs, int rows_per_tile, int32_t* tile_seq,
                          int32_t* tile_row);

// The head_dims beyond 128 that paged_attention (and no tensor-core kernel) also takes: Gemma's 256, and
// Gemma 4's global layers' 512 (paged_attention_block.cuh: half the items and keys of a CTA).
constexpr int kWideHeadDim = 256;
constexpr int kWidestHeadDim = 512;

// Throws cbatch::Error (prefixed with op) unless the tile count, heads, block size and head_dim suit the
// attention kernels over attention tiles: head_dim a multiple of 16 up to 128 (or kWideHeadDim and
// kWidestHeadDim where wide_ok), num_heads / num_kv_heads at most kAttentionItemsPerTile, tile_rows at most
// kAttentionItemsPerTile, cache_heads (where set) at least num_kv_heads.
void check_paged_attention_sizes(const char* op, const AttentionShape& shape, int num_tiles, int max_blocks_per_seq,
                                 bool wide_ok = false);

}  // namespace cbatch
