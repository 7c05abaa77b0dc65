// Tensor-core paged attention for the multi-row tiles of a ragged batch (prefill chunks), bf16 and fp16.
//
// Same contract and tile list as paged_attention (paged_attention.hpp); a CTA serves one tile's 64 items
// ((row, q head) pairs sharing kv head blockIdx.y, item = row * group + head in group; the next 64 are the
// next CTA's along grid z where the tile holds more: TileCta::item0) with 4 warps of 16
// items each; a warp keeps its 16 q rows in WMMA fragments. Per tile of 64 keys (loaded raw through the
// block table into shared memory, zeros past the last position): S = Q K^T on the tensor cores (WMMA
// 16x16x16, fp32 accumulate) into shared memory; the warp's 16 rows get the fp32 online softmax (scale,
// causal mask by position, running max and sum) and their probabilities P are written back in T; O (fp32,
// shared) is rescaled row by row and O += P V on the tensor cores. A warp touches only its own rows of S,
// P and O, so only the K/V tile needs block barriers. WMMA fragment layouts are opaque, which is why S
// and O live in shared memory between the phases. The family build (tile_attention.cuh) starts at the
// tile's first visible key, masks each row's keys before its window, and softcaps the scores. An FP8 cache
// (KV = Fp8E4M3) is dequantized to T (times its scale) as the K/V tile goes to shared memory: the tensor
// cores see the same values as with a cache in T holding the dequantized ones.
#include "cuda/attention/prefill_attention.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>

#include <cmath>

#include "cuda/attention/attention_tiles.hpp"
#include "cuda/common/cuda_check.hpp"
#include "cuda/common/cuda_dtype.cuh"
#include "cuda/attention/kv_cache_element.cuh"
#include "cuda/attention/tile_attention.cuh"
#include "cuda/attention/tile_attention_args.cuh"

namespace cbatch {
namespace {

namespace wmma = nvcuda::wmma;

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kItems = kAttentionItemsPerTile;  // 64: 16 per warp
constexpr int kKeys = 64;                       // keys per tile
constexpr int kFrag = 16;                       // WMMA m = n = k
static_assert(kItems == kWarps * kFrag, "one 16-row fragment of items per warp");

// Shared-memory layout for head_dim HD. Row strides are padded against bank conflicts by 8 elements (16
// bytes for T, 32 for float); fragments start at rows and columns that are multiples of 16, so every
// fragment pointer stays 32-byte aligned as WMMA requires.
template <int HD>
struct Layout {
  static constexpr int kQkvLd = HD + 8;     // T: s_q (kItems rows), s_k, s_v (kKeys rows)
  static constexpr int kPLd = kKeys + 8;    // T: s_p (kItems, kKeys)
  static constexpr int kSLd = kKeys + 8;    // float: s_s (kItems, kKeys)
  static constexpr int kOLd = HD + 8;       // float: s_o (kItems, HD)
  template <typename T>
  static constexpr size_t bytes() {
    return sizeof(T) * (static_cast<size_t>(kItems + 2 * kKeys) * kQkvLd + kItems * kPLd) +
           sizeof(float) * (static_cast<size_t>(kItems) * kSLd + kItems * kOLd);
  }
};

// 16 bytes of T copied as they are.
template <typename T>
__device__ __forceinline__ void copy16(T* dst, const T* src) {
  *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src);
}

template <typename T>
__device__ __forceinline__ void zero16(T* dst) {
  *reinterpret_cast<uint4*>(dst) = make_uint4(0u, 0u, 0u, 0u);
}

template <typename T>
using RowFragment = wmma::fragment<wmma::matrix_a, kFrag, kFrag, kFrag, T, wmma::row_major>;

// S rows of one warp: s_s[16 rows][0 .. kKeys) = Q rows (held in fragments, d = 16 k ..) x K^T.
template <typename T, int HD>
__device__ __forceinline__ void scores_mma(const RowFragment<T> (&q)[HD / kFrag], const T* s_k, float* s_s) {
  using L = Layout<HD>;
#pragma unroll
  for (int n = 0; n < kKeys / kFrag; ++n) {
    wmma::fragment<wmma::accumulator, kFrag, kFrag, kFrag, float> acc;
    wmma::fill_fragment(acc, 0.0f);
#pragma unroll
    for (int k = 0; k < HD / kFrag; ++k) {
      wmma::fragment<wmma::matrix_b, kFrag, kFrag, kFrag, T, wmma::col_major> kt;  // (d, key) = s_k[key][d]
      wmma::load_matrix_sync(kt, s_k + n * kFrag * L::kQkvLd + k * kFrag, L::kQkvLd);
      wmma::mma_sync(acc, q[k], kt, acc);
    }
    wmma::store_matrix_sync(s_s + n * kFrag, acc, L::kSLd, wmma::mem_row_major);
  }
}

// O rows of one warp: s_o[16 rows][0 .. HD) += P rows x V.
template <typename T, int HD>
__device__ __forceinline__ void values_mma(const T* s_p, const T* s_v, float* s_o) {
  using L = Layout<HD>;
#pragma unroll
  for (int j = 0; j < HD / kFrag; ++j) {
    wmma::fragment<wmma::accumulator, kFrag, kFrag, kFrag, float> acc;
    wmma::load_matrix_sync(acc, s_o + j * kFrag, L::kOLd, wmma::mem_row_major);
#pragma unroll
    for (int k = 0; k < kKeys / kFrag; ++k) {
      RowFragment<T> p;
      wmma::fragment<wmma::matrix_b, kFrag, kFrag, kFrag, T, wmma::row_major> v;  // (key, d) = s_v[key][d]
      wmma::load_matrix_sync(p, s_p + k * kFrag, L::kPLd);
      wmma::load_matrix_sync(v, s_v + k * kFrag * L::kQkvLd + j * kFrag, L::kQkvLd);
      wmma::mma_sync(acc, p, v, acc);
    }
    wmma::store_matrix_sync(s_o + j * kFrag, acc, L::kOLd, wmma::mem_row_major);
  }
}

// The per-item state of the CTA's online softmax, in shared memory (the WMMA fragments' layout is opaque).
struct TileSoftmax {
  int* pos;      // (kItems) position of each item's row (0 for unused items: keeps them finite)
  float* m;      // (kItems) running max of the scaled scores
  float* l;      // (kItems) running sum of exp(score - m)
  float* alpha;  // (kItems) this tile's rescale of O; at the end, the family build's 1 / denominator
};

// O zeroed, and each item's position and empty softmax.
template <typename T, int HD, typename KV>
__device__ __forceinline__ void clear_tile_state(const TileAttentionArgs<T, KV>& a, const TileCta& c, float* s_o,
                                                 const TileSoftmax& sm) {
  using L = Layout<HD>;
  for (int idx = threadIdx.x; idx < kItems * HD; idx += kThreads) s_o[(idx / HD) * L::kOLd + idx % HD] = 0.0f;
  if (threadIdx.x < kItems) {
    const int item = threadIdx.x;
    sm.pos[item] = item < c.num_items ? a.positions[c.row_begin + c.row_of(item)] : 0;
    sm.m[item] = -INFINITY;
    sm.l[item] = 0.0f;
  }
}

// K and V of the tile's keys key0 .. key0 + num_keys - 1 into s_k and s_v in T (an FP8 cache's codes
// dequantized, times their scales); zeros past num_keys.
template <typename T, int HD, typename KV>
__device__ __forceinline__ void load_kv_tile(const TileAttentionArgs<T, KV>& a, const TileCta& c, int key0,
                                             int num_keys, float k_scale, float v_scale, T* s_k, T* s_v) {
  using L = Layout<HD>;
  constexpr int kVec = 16 / sizeof(T);
  constexpr int kPacksPerRow = HD / kVec;
  for (int idx = threadIdx.x; idx < kKeys * kPacksPerRow; idx += kThreads) {
    const int key = idx / kPacksPerRow;
    const int d0 = (idx % kPacksPerRow) * kVec;
    T* k_dst = s_k + key * L::kQkvLd + d0;
    T* v_dst = s_v + key * L::kQkvLd + d0;
    if (key < num_keys) {
      const size_t offset = tile_cache_offset<HD>(a, c, key0 + key) + d0;
      load_kv_pack_as(k_dst, a.k_cache + offset, k_scale);  // copy16, or FP8 codes dequantized to T
      load_kv_pack_as(v_dst, a.v_cache + offset, v_scale);
    } else {  // never read past the last position (it may be garbage); zero V keeps 0 * V finite
      zero16(k_dst);
      zero16(v_dst);
    }
  }
}

// Online softmax of the warp's 16 items (from item0) over the tile's keys from key0, one row at a time across
// the warp (lane owns keys lane and lane + 32): scales (in the family build softcaps) and masks S, writes P
// in T, updates each item's max and sum and leaves its rescale of O in sm.alpha.
template <typename T, int HD, bool FAMILY, typename KV>
__device__ __forceinline__ void softmax_rows(const TileAttentionArgs<T, KV>& a, int item0, int key0, int lane,
                                             const float* s_s, T* s_p, const TileSoftmax& sm) {
  using L = Layout<HD>;
  for (int r = 0; r < kFrag; ++r) {
    const int item = item0 + r;
    const int pos = sm.pos[item];
    float s[2];
    float tile_max = -INFINITY;
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int key = lane + 32 * j;
      if constexpr (FAMILY) {
        const bool visible = key0 + key <= pos && key0 + key >= window_first_key(pos, a.window);
        s[j] = visible ? softcapped(s_s[item * L::kSLd + key] * a.scale, a.softcap) : -INFINITY;
      } else {
        s[j] = key0 + key <= pos ? s_s[item * L::kSLd + key] * a.scale : -INFINITY;
      }
      tile_max = fmaxf(tile_max, s[j]);
    }
    // Finite: key 0 is visible to every item in the first tile, so m is finite from then on. In the
    // family build a row may see no key of a tile before its window: m_new stays -inf, and the exponents
    // are taken against 0 instead (alpha = 0 on a zero O, p = 0).
    const float m_old = sm.m[item];
    const float m_new = fmaxf(m_old, warp_max(tile_max));
    const float m_ref = FAMILY && m_new == -INFINITY ? 0.0f : m_new;
    float p_sum = 0.0f;
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const float p = expf(s[j] - m_ref);  // masked keys: exp(-inf) = 0
      s_p[item * L::kPLd + lane + 32 * j] = from_float<T>(p);
      p_sum += p;
    }
    p_sum = warp_sum(p_sum);
    __syncwarp();  // every lane has read sm.m[item] before lane 0 rewrites it
    if (lane == 0) {
      const float alpha = expf(m_old - m_ref);  // 0 in the first tile, where m_old = -inf
      sm.alpha[item] = alpha;
      sm.l[item] = sm.l[item] * alpha + p_sum;
      sm.m[item] = m_new;
    }
  }
}

// out = O / l for every item of the tile, or in the family build with sinks O times each item's sink
// normalizer (the sink joins once, here).
template <typename T, int HD, bool FAMILY, typename KV>
__device__ __forceinline__ void write_tile(const TileAttentionArgs<T, KV>& a, const TileCta& c, const float* s_o,
                                           const TileSoftmax& sm) {
  using L = Layout<HD>;
  const bool sunk = FAMILY && a.sinks != nullptr;  // the family build with sinks: each item's 1 / denominator
  if (sunk && threadIdx.x < c.num_items) {
    const int item = threadIdx.x;
    sm.alpha[item] = sink_normalizer(sm.m[item], sm.l[item], a.sinks[c.q_head_of(item)]);
  }
  if (sunk) __syncthreads();

  for (int idx = threadIdx.x; idx < c.num_items * HD; idx += kThreads) {
    const int item = idx / HD;
    const int d = idx % HD;
    // l >= 1: the maximum contributes exp(0).
    const float o = s_o[item * L::kOLd + d];
    tile_item_out<HD>(a, c, item)[d] = from_float<T>(sunk ? o * sm.alpha[item] : o / sm.l[item]);
  }
}

template <typename T, int HD, bool FAMILY, typename KV>
__global__ void __launch_bounds__(kThreads) prefill_attention_kernel(const TileAttentionArgs<T, KV> a) {
  using L = Layout<HD>;
  constexpr int kVec = 16 / sizeof(T);
  constexpr int kPacksPerRow = HD / kVec;
  extern __shared__ __align__(128) unsigned char smem[];
  T* s_q = reinterpret_cast<T*>(smem);                               // (kItems, kQkvLd)
  T* s_k = s_q + kItems * L::kQkvLd;                                  // (kKeys, kQkvLd)
  T* s_v = s_k + kKeys * L::kQkvLd;                                   // (kKeys, kQkvLd)
  T* s_p = s_v + kKeys * L::kQkvLd;                                   // (kItems, kPLd)
  float* s_s = reinterpret_cast<float*>(s_p + kItems * L::kPLd);     // (kItems, kSLd)
  float* s_o = s_s + kItems * L::kSLd;                                // (kItems, kOLd)
  __shared__ int s_pos[kItems];
  __shared__ float s_m[kItems];
  __shared__ float s_l[kItems];
  __shared__ float s_alpha[kItems];
  const TileSoftmax sm{s_pos, s_m, s_l, s_alpha};

  const TileCta c = tile_cta<HD, kItems>(a);
  if (c.num_items == 0) return;  // a slice past the tile's items (the whole CTA: no barrier is skipped)
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const float k_scale = kv_scale<KV>(a.k_scale);
  const float v_scale = kv_scale<KV>(a.v_scale);
  // The tile's q vectors as they are (zeros past num_items). In the kernel's body rather than a function of
  // its own: inlined from one, the two stores of each pack are not merged into one.
  for (int idx = threadIdx.x; idx < kItems * kPacksPerRow; idx += kThreads) {
    const int item = idx / kPacksPerRow;
    const int d0 = (idx % kPacksPerRow) * kVec;
    T* dst = s_q + item * L::kQkvLd + d0;
    if (item < c.num_items) {
      copy16(dst, tile_item_q<HD>(a, c, item) + d0);
    } else {
      zero16(dst);
    }
  }
  clear_tile_state<T, HD>(a, c, s_o, sm);
  __syncthreads();

  // Every item's position (a slice need not start at a row's first item, so no stride of group).
  const TileKeys keys = tile_keys<FAMILY>(s_pos, c.num_items, 1, a.window);
  const int item0 = warp * kFrag;             // this warp's first item
  const bool warp_busy = item0 < c.num_items;  // warp-uniform: fragments need the whole warp
  RowFragment<T> q[HD / kFrag];  // this warp's 16 q rows, constant over the key tiles
  if (warp_busy) {
#pragma unroll
    for (int k = 0; k < HD / kFrag; ++k) wmma::load_matrix_sync(q[k], s_q + item0 * L::kQkvLd + k * kFrag, L::kQkvLd);
  }

  for (int key0 = keys.first; key0 <= keys.last; key0 += kKeys) {
    const int num_keys = min(kKeys, keys.last + 1 - key0);
    __syncthreads();  // every warp is done with the previous tile's s_k and s_v
    load_kv_tile<T, HD>(a, c, key0, num_keys, k_scale, v_scale, s_k, s_v);
    __syncthreads();
    if (!warp_busy) continue;

    scores_mma<T, HD>(q, s_k, s_s + item0 * L::kSLd);
    __syncwarp();
    softmax_rows<T, HD, FAMILY>(a, item0, key0, lane, s_s, s_p, sm);
    __syncwarp();
    for (int idx = lane; idx < kFrag * HD; idx += 32) {
      const int item = item0 + idx / HD;
      s_o[item * L::kOLd + idx % HD] *= s_alpha[item];
    }
    __syncwarp();
    values_mma<T, HD>(s_p + item0 * L::kPLd, s_v, s_o + item0 * L::kOLd);
  }
  __syncthreads();
  write_tile<T, HD, FAMILY>(a, c, s_o, sm);
}

}  // namespace

template <typename T, typename KV>
void prefill_attention(T* d_out, const T* d_qkv, const KV* d_k_cache, const KV* d_v_cache, const int32_t* d_positions,
                       const int32_t* d_query_start, const int32_t* d_block_tables, int max_blocks_per_seq,
                       const int32_t* d_tile_seq, const int32_t* d_tile_row, int num_tiles,
                       const AttentionShape& shape, cudaStream_t stream, const AttentionScoring& scoring,
                       const KvScales& scales) {
  check_paged_attention_sizes("prefill_attention", shape, num_tiles, max_blocks_per_seq);
  if (num_tiles == 0) return;
  const TileAttentionArgs<T, KV> args =
      make_tile_attention_args("prefill_attention", d_out, d_qkv, d_k_cache, d_v_cache, d_positions, d_query_start,
                               d_block_tables, max_blocks_per_seq, d_tile_seq, d_tile_row, shape, scoring, scales);
  dispatch_head_dim(shape.head_dim, [&](auto hd) {
    dispatch_scoring(scoring, [&](auto family) {
      constexpr int HD = decltype(hd)::value;
      constexpr bool FAMILY = decltype(family)::value;
      launch_over_tiles<T, KV>(prefill_attention_kernel<T, HD, FAMILY, KV>, args, num_tiles,
                               attention_tile_slices(shape, kItems), kThreads, Layout<HD>::template bytes<T>(), stream);
    });
  });
}

#define CBATCH_INSTANTIATE_PREFILL(T, KV)                                                                  \
  template void prefill_attention<T, KV>(T*, const T*, const KV*, const KV*, const int32_t*, const int32_t*,  \
                                         const int32_t*, int, const int32_t*, const int32_t*, int,            \
                                         const AttentionShape&, cudaStream_t, const AttentionScoring&,        \
                                         const KvScales&);
CBATCH_INSTANTIATE_PREFILL(__nv_bfloat16, __nv_bfloat16)
CBATCH_INSTANTIATE_PREFILL(__half, __half)
CBATCH_INSTANTIATE_PREFILL(__nv_bfloat16, Fp8E4M3)
CBATCH_INSTANTIATE_PREFILL(__half, Fp8E4M3)
#undef CBATCH_INSTANTIATE_PREFILL

}  // namespace cbatch
