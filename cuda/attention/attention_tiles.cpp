// The tile list of the attention kernels over attention tiles, and the check of their sizes.
#include "cuda/attention/attention_tiles.hpp"

#include <string>

#include "engine/base/error.hpp"

namespace cbatch {

int paged_attention_rows_per_tile(const AttentionShape& shape) {
  if (shape.tile_rows > 0) return shape.tile_rows;
  const int group = shape.num_kv_heads > 0 ? shape.num_heads / shape.num_kv_heads : 1;
  return group > 0 && group <= kAttentionItemsPerTile ? kAttentionItemsPerTile / group : 1;
}

int attention_tile_slices(const AttentionShape& shape, int items_per_cta) {
  const int group = shape.num_kv_heads > 0 ? shape.num_heads / shape.num_kv_heads : 1;
  return (paged_attention_rows_per_tile(shape) * group + items_per_cta - 1) / items_per_cta;
}

void check_paged_attention_sizes(const char* op, const AttentionShape& shape, int num_tiles, int max_blocks_per_seq,
                                 bool wide_ok) {
  const bool ok = num_tiles >= 0 && shape.num_heads > 0 && shape.num_kv_heads > 0 && shape.num_kv_heads <= 65535 &&
                  shape.num_heads % shape.num_kv_heads == 0 &&
                  shape.num_heads / shape.num_kv_heads <= kAttentionItemsPerTile && shape.block_size > 0 &&
                  max_blocks_per_seq > 0 && shape.tile_rows >= 0 && shape.tile_rows <= kAttentionItemsPerTile &&
                  (shape.cache_heads == 0 || shape.cache_heads >= shape.num_kv_heads);
  if (!ok) {
    throw Error(std::string(op) + ": bad sizes num_tiles=" + std::to_string(num_tiles) + " num_heads=" +
                std::to_string(shape.num_heads) + " num_kv_heads=" + std::to_string(shape.num_kv_heads) +
                " block_size=" + std::to_string(shape.block_size) +
                " max_blocks_per_seq=" + std::to_string(max_blocks_per_seq) + " tile_rows=" +
                std::to_string(shape.tile_rows) + " cache_heads=" + std::to_string(shape.cache_heads));
  }
  const int hd = shape.head_dim;
  if ((hd <= 0 || hd % 16 != 0 || hd > 128) && !(wide_ok && (hd == kWideHeadDim || hd == kWidestHeadDim))) {
    throw Error(std::string(op) + ": head_dim " + std::to_string(hd) +
                " is not supported (a multiple of 16 up to 128" + (wide_ok ? ", 256 or 512)" : ")"));
  }
}

int build_attention_tiles(const int32_t* query_start, int num_seqs, int rows_per_tile, int32_t* tile_seq,
                          int32_t* tile_row) {
  int num_tiles = 0;
  for (int s = 0; s < num_seqs; ++s) {
    for (int r = query_start[s]; r < query_start[s + 1]; r += rows_per_tile) {
      tile_seq[num_tiles] = s;
      tile_row[num_tiles] = r;
      ++num_tiles;
    }
  }
  return num_tiles;
}

}  // namespace cbatch
