// The decode attention kernels' arguments and the paged-cache addressing they share, written with no CUDA
// header so that the tensor-core kernels' block code (decode_mma_block.cuh, decode_stream_block.cuh) can
// also run on the host through tests/cuda/block_emulator.hpp. Cache layout (num_blocks, cache_heads,
// block_size, head_dim), as in attention_shape.hpp. Every decode kernel has Llama's build (FAMILY = false)
// and the family build, which reads the softcap and the window (AttentionScoring) from the arguments: a
// windowed row's keys start at its window's first key, so the keys before it cost nothing.
#pragma once
#include <cstddef>
#include <cstdint>

#include "cuda/attention/attention_shape.hpp"
#include "cuda/attention/kv_cache_element.cuh"

namespace cbatch::decode_detail {

constexpr int kMmaWarps = 4;  // warps per CTA of the tensor-core kernels

// KV: the cache element, T or Fp8E4M3 (kv_cache_dtype.hpp), whose scales k_scale and v_scale point to.
template <typename T, typename KV = T>
struct DecodeArgs {
  T* out;                       // (num_tokens, num_heads * hd)
  const T* qkv;                 // (num_tokens, (num_heads + 2 * num_kv_heads) * hd)
  const KV* k_cache;            // (num_blocks, cache_heads, block_size, hd)
  const KV* v_cache;            // (num_blocks, cache_heads, block_size, hd)
  const int32_t* positions;     // (num_tokens)
  const int32_t* query_start;   // (num_seqs_in_batch + 1)
  const int32_t* block_tables;  // (num_seqs_in_batch, max_blocks_per_seq)
  const int32_t* decode_seqs;   // (num_seqs) batch sequence index of each decode row
  float* partial_o;             // (num_seqs * num_kv_heads * num_splits, group, hd) when split;
                                // (2 * num_warps, group, hd) for the stream kernel
  float* partial_ml;            // the same partials' (m, l): (.., group, 2)
  int max_blocks_per_seq;
  int num_heads;
  int num_kv_heads;
  int block_size;
  int keys_per_split;
  float scale;
  float softcap;                // the family build's: 0 = none
  int window;                   // the family build's: 0 = none
  const float* k_scale;         // (1) an FP8 cache's; null otherwise
  const float* v_scale;         // (1)
  const float* sinks;           // (num_heads) sink logits (AttentionScoring), joined at the output; null: none
  int cache_heads = 0;          // heads' room in a cache block (AttentionShape::cache_heads); 0: num_kv_heads

  __device__ __forceinline__ int block_heads() const { return cache_heads > 0 ? cache_heads : num_kv_heads; }
};

template <typename T, typename KV>
__device__ __forceinline__ size_t cache_offset(const DecodeArgs<T, KV>& a, const int32_t* table, int kv_head, int pos,
                                               int hd) {
  const size_t block = static_cast<size_t>(table[pos / a.block_size]);
  return ((block * a.block_heads() + kv_head) * a.block_size + pos % a.block_size) * hd;
}

// What one CTA of either decode kernel covers: the only row `row` of sequence decode_seqs[blockIdx.x],
// kv head blockIdx.y (and its `group` q heads), keys [key_begin, key_end) of split blockIdx.z. The splits
// cut the keys the row sees: from 0, or in the family build from its window's first key.
struct DecodeCta {
  int kv_head, group, row, key_begin, key_end;
  const int32_t* table;  // the sequence's block table
};

template <typename T, bool FAMILY = false, typename KV = T>
__device__ __forceinline__ DecodeCta decode_cta(const DecodeArgs<T, KV>& a) {
  const int seq = a.decode_seqs[blockIdx.x];
  DecodeCta c;
  c.kv_head = blockIdx.y;
  c.group = a.num_heads / a.num_kv_heads;
  c.row = a.query_start[seq];
  if constexpr (FAMILY) {
    c.key_begin = window_first_key(a.positions[c.row], a.window) + blockIdx.z * a.keys_per_split;
  } else {
    c.key_begin = blockIdx.z * a.keys_per_split;
  }
  c.key_end = min(a.positions[c.row] + 1, c.key_begin + a.keys_per_split);
  c.table = a.block_tables + static_cast<size_t>(seq) * a.max_blocks_per_seq;
  return c;
}

// A warp's copy of ROWS rows of HD FP8 codes (row stride codes_ld) dequantized into rows of T (stride
// tile_ld), for the tensor-core kernels' ldmatrix: 8 codes a lane and step. See decode_stream_block.cuh
// for why a converted copy.
template <int ROWS, int HD, typename T, typename KV>
__device__ __forceinline__ void convert_kv_rows(const KV* codes, int codes_ld, T* tile, int tile_ld, float scale,
                                                int lane) {
  constexpr int kPieces = HD / 8;
  static_assert(ROWS * kPieces % 32 == 0, "whole pieces per lane");
#pragma unroll
  for (int j = 0; j < ROWS * kPieces / 32; ++j) {
    const int i = lane + 32 * j;
    const int k = i / kPieces, piece = i % kPieces;
    load_kv_pack_as(tile + k * tile_ld + piece * 8, codes + k * codes_ld + piece * 8, scale);
  }
}

// The K tile the tensor-core kernels' matrix code reads for one pipeline stage (a K tile of ROWS rows,
// its V tile stage_tile_elems after it); the V tile follows it at tile_elems. For a cache of T that is the
// stage itself; for an FP8 cache, the warp's converted copy (K, then V), dequantized here.
template <int ROWS, int HD, typename T, typename KV>
__device__ __forceinline__ const T* kv_tiles_for_mma(const KV* stage, int stage_ld, int stage_tile_elems, T* converted,
                                                     int ld, int tile_elems, float k_scale, float v_scale, int lane) {
  if constexpr (kFp8Kv<KV>) {
    convert_kv_rows<ROWS, HD>(stage, stage_ld, converted, ld, k_scale, lane);
    convert_kv_rows<ROWS, HD>(stage + stage_tile_elems, stage_ld, converted + tile_elems, ld, v_scale, lane);
    __syncwarp();
    return converted;
  } else {
    return stage;
  }
}

// What a stream launch covers (decode_stream.hpp): the tile list of the decode items and its warps.
struct StreamArgs {
  const int32_t* tile_start;  // (num_seqs + 1)
  int64_t num_tiles;
  int num_warps;
  int num_seqs;
};

}  // namespace cbatch::decode_detail
