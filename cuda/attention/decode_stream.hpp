// The work schedule of the stream decode kernel (DecodeKernel::kStream), shared by the host (planning,
// tests) and the kernel. The keys of every decode item (one sequence and one kv head) are cut into tiles of
// kTile keys; the items' tiles, sequence after sequence and kv head after kv head within a sequence, form
// one list of num_tiles tiles, and warp w of the launch takes the contiguous range
// [warp_begin(w), warp_begin(w + 1)). Every warp so streams about the same number of tiles through its
// copy pipeline and crosses item boundaries without draining it: no tail of short CTAs, no split-KV
// heuristic. An item wholly inside one warp's range is written out by that warp. An item cut by range
// boundaries leaves one partial result (o, m, l) per piece: in slot 2 w when the piece began before warp
// w's range (its head piece), in slot 2 w + 1 when it runs past the range's end (its tail piece); the
// warp whose head piece ends the item merges the pieces in a second launch (merging_warp_first_piece).
#pragma once
#include <cstdint>

#include "cuda/attention/attention_shape.hpp"
#include "engine/base/host_device.hpp"

namespace cbatch::decode_stream {

constexpr int kTile = 32;            // keys per tile (one per lane when a warp copies a tile)
constexpr int kMinTilesPerWarp = 4;  // shorter ranges would spend more on a warp's start than on its tiles

// First tile of warp w's range; warp_begin(num_warps) == num_tiles.
CBATCH_HOST_DEVICE inline int64_t warp_begin(int64_t w, int64_t num_tiles, int num_warps) {
  return w * num_tiles / num_warps;
}

// The warp whose range holds tile t: the largest w with warp_begin(w) <= t. Needs num_warps <= num_tiles
// (no empty range), which choose_num_warps guarantees.
CBATCH_HOST_DEVICE inline int warp_of(int64_t t, int64_t num_tiles, int num_warps) {
  return static_cast<int>(((t + 1) * num_warps - 1) / num_tiles);
}

// A position in the tile list: tile `tile` of the item (seq, kv_head), seq an index into the decode list.
// tile_start (num_seqs + 1 entries) counts tiles per kv head: sequence s owns the tiles
// [tile_start[s] * num_kv_heads, tile_start[s + 1] * num_kv_heads), kv head after kv head.
struct TileCursor {
  int64_t t = 0;      // index in the tile list
  int seq = 0;
  int kv_head = 0;
  int tile = 0;       // tile within the item: keys [tile * kTile, tile * kTile + kTile)
  int num_tiles = 0;  // the item's tiles

  CBATCH_HOST_DEVICE int64_t item_begin() const { return t - tile; }
  CBATCH_HOST_DEVICE int64_t item_end() const { return t - tile + num_tiles; }

  // Steps to the next tile; true when it belongs to a new sequence (the caller loads that sequence's row
  // and block table). Past the last sequence num_tiles is 0 and the cursor must not be used.
  CBATCH_HOST_DEVICE bool advance(const int32_t* tile_start, int num_seqs, int num_kv_heads) {
    ++t;
    if (++tile < num_tiles) return false;
    tile = 0;
    if (++kv_head < num_kv_heads) return false;
    kv_head = 0;
    ++seq;
    num_tiles = seq < num_seqs ? tile_start[seq + 1] - tile_start[seq] : 0;
    return true;
  }
};

// The cursor at tile t (0 <= t < num_tiles): a binary search for the last sequence starting at or before
// t (every sequence has at least one tile, so the starts increase strictly).
CBATCH_HOST_DEVICE inline TileCursor locate(int64_t t, const int32_t* tile_start, int num_seqs, int num_kv_heads) {
  int lo = 0;
  int hi = num_seqs - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (static_cast<int64_t>(tile_start[mid]) * num_kv_heads <= t) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  TileCursor c;
  c.t = t;
  c.seq = lo;
  c.num_tiles = tile_start[lo + 1] - tile_start[lo];
  const int64_t within = t - static_cast<int64_t>(tile_start[lo]) * num_kv_heads;
  c.kv_head = static_cast<int>(within / c.num_tiles);
  c.tile = static_cast<int>(within % c.num_tiles);
  return c;
}

// Where warp w (range [t0, t1)) leaves its piece of the item [begin, end): -1 when the range holds the
// whole item (the warp writes the output itself), else slot 2 w (head piece: the item began before t0)
// or 2 w + 1 (tail piece: the item began in the range and runs past t1).
CBATCH_HOST_DEVICE inline int piece_slot(int64_t begin, int64_t end, int64_t t0, int64_t t1, int w) {
  if (begin >= t0 && end <= t1) return -1;
  return begin < t0 ? 2 * w : 2 * w + 1;
}

// The merge of a cut item [begin, end) is done for warp w when w's head piece ends it (begin < t0 and
// end <= t1 for w's range). Its pieces, in key order: slot 2 w0 + 1 of the warp w0 = warp_of(begin) where
// it began, then slots 2 v for v = w0 + 1 .. w. Returns w0, or -1 when warp w merges nothing.
CBATCH_HOST_DEVICE inline int merging_warp_first_piece(const TileCursor& first_of_range, int64_t t0, int64_t t1,
                                                       int64_t num_tiles, int num_warps) {
  if (first_of_range.item_begin() == t0 || first_of_range.item_end() > t1) return -1;
  return warp_of(first_of_range.item_begin(), num_tiles, num_warps);
}

// Host side: tile_start of the decode sequences (the only row r = query_start[s] of s = decode_seqs[i]
// attends to keys 0..positions[r], or through a window of `window` keys to window_first_key..positions[r];
// its tiles then start at that key).
inline void build_tile_start(const int32_t* positions, const int32_t* query_start, const int32_t* decode_seqs,
                             int num_decode, int32_t* tile_start, int window = 0) {
  tile_start[0] = 0;
  for (int i = 0; i < num_decode; ++i) {
    const int pos = positions[query_start[decode_seqs[i]]];
    const int keys = pos + 1 - window_first_key(pos, window);
    tile_start[i + 1] = tile_start[i] + (keys + kTile - 1) / kTile;
  }
}

// Warps for a launch over num_tiles tiles: as many as fit (max_warps) while each gets kMinTilesPerWarp
// tiles, at least one, never more than there are tiles.
inline int choose_num_warps(int64_t num_tiles, int max_warps) {
  if (num_tiles <= 0 || max_warps <= 0) return 0;
  const int64_t by_tiles = num_tiles / kMinTilesPerWarp;
  const int64_t warps = by_tiles < max_warps ? by_tiles : max_warps;
  return static_cast<int>(warps > 0 ? warps : 1);
}

}  // namespace cbatch::decode_stream
