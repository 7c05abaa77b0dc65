// Paged causal attention over a ragged batch: one launch serves prefill chunks (many query rows per
// sequence) and decode rows together, with GQA and an fp32 online softmax.
//
// Grid (num_tiles, num_kv_heads), 128 threads. A CTA takes one tile of a sequence's query rows (built on
// the host) and one kv head; its 64 "items" are the (row, q head) pairs of that tile whose q heads share
// the kv head (item it = row it / group, q head kv_head * group + it % group). Threads form 8 groups of
// 16 lanes (a half-warp each); group ty owns items ty, ty + 8, ..., ty + 56, and lane tx owns keys
// tx, tx + 16 of each key tile and output dims tx, tx + 16, ... The CTA walks the sequence's keys
// 0..max position of its rows in tiles of 32, loading K and V through the block table into shared
// memory (fp32, rows padded by one float against bank conflicts), then per item: scores (masked to
// key <= the row's position), running max and sum reduced over the half-warp with shuffles, and the
// weighted V accumulated in registers. Item softmax state lives, replicated, in the 16 lanes of its group.
// The family build (tile_attention.cuh) starts at the tile's first visible key, masks each item's keys
// before its window, and softcaps the scores. An FP8 cache (KV = Fp8E4M3) is read 16 codes at a time and
// widened to fp32 times its scale on the way to shared memory; the rest is unchanged.
// Shared memory: q (64, hd+1) + k (32, hd+1) + v (32, hd) + p (64, 33) floats: 74 KB at head_dim 128,
// 140 KB at 256 (Gemma's, which only this kernel takes). At 512 (Gemma 4's global layers) a CTA serves 32
// items over key tiles of 16 (133 KB; paged_attention_block.cuh's Geometry), and a tile's items past a CTA's
// (past 32 at 512, or past 64 where the layer's GQA group is larger than the one the tile list was cut for)
// are the next CTAs' along grid z. The block code is in paged_attention_block.cuh.
#include "cuda/attention/paged_attention.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>

#include "cuda/attention/attention_tiles.hpp"
#include "cuda/common/cuda_check.hpp"
#include "cuda/common/cuda_dtype.cuh"
#include "cuda/attention/paged_attention_block.cuh"
#include "cuda/attention/tile_attention.cuh"

namespace cbatch {
namespace {

using namespace paged_attention_detail;

template <typename T, int HD, bool FAMILY, typename KV>
__global__ void __launch_bounds__(kThreads) paged_attention_kernel(const TileAttentionArgs<T, KV> a) {
  extern __shared__ float smem[];
  paged_attention_block<T, HD, FAMILY, KV>(a, smem);
}

}  // namespace

size_t paged_attention_smem_bytes(int head_dim) {
  size_t bytes = 0;
  dispatch_head_dim<true>(head_dim, [&](auto hd) { bytes = smem_bytes<decltype(hd)::value>(); });
  return bytes;
}

template <typename T, typename KV>
void paged_attention(T* d_out, const T* d_qkv, const KV* d_k_cache, const KV* d_v_cache, const int32_t* d_positions,
                     const int32_t* d_query_start, const int32_t* d_block_tables, int max_blocks_per_seq,
                     const int32_t* d_tile_seq, const int32_t* d_tile_row, int num_tiles,
                     const AttentionShape& shape, cudaStream_t stream, const AttentionScoring& scoring,
                     const KvScales& scales) {
  check_paged_attention_sizes("paged_attention", shape, num_tiles, max_blocks_per_seq, true);
  if (num_tiles == 0) return;
  const TileAttentionArgs<T, KV> args =
      make_tile_attention_args("paged_attention", d_out, d_qkv, d_k_cache, d_v_cache, d_positions, d_query_start,
                               d_block_tables, max_blocks_per_seq, d_tile_seq, d_tile_row, shape, scoring, scales);
  dispatch_head_dim<true>(shape.head_dim, [&](auto hd) {
    dispatch_scoring(scoring, [&](auto family) {
      constexpr int HD = decltype(hd)::value;
      constexpr bool FAMILY = decltype(family)::value;
      launch_over_tiles<T, KV>(paged_attention_kernel<T, HD, FAMILY, KV>, args, num_tiles,
                               attention_tile_slices(shape, items_per_cta<HD>()), kThreads, smem_bytes<HD>(), stream);
    });
  });
}

#define CBATCH_INSTANTIATE_ATTENTION(T, KV)                                                                \
  template void paged_attention<T, KV>(T*, const T*, const KV*, const KV*, const int32_t*, const int32_t*,  \
                                       const int32_t*, int, const int32_t*, const int32_t*, int,            \
                                       const AttentionShape&, cudaStream_t, const AttentionScoring&,        \
                                       const KvScales&);
CBATCH_INSTANTIATE_ATTENTION(float, float)
CBATCH_INSTANTIATE_ATTENTION(__nv_bfloat16, __nv_bfloat16)
CBATCH_INSTANTIATE_ATTENTION(__half, __half)
CBATCH_INSTANTIATE_ATTENTION(__nv_bfloat16, Fp8E4M3)
CBATCH_INSTANTIATE_ATTENTION(__half, Fp8E4M3)
#undef CBATCH_INSTANTIATE_ATTENTION

}  // namespace cbatch
