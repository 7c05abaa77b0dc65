// The block code of the paged attention over attention tiles (paged_attention.cu): see that file's header.
// It uses no CUDA header of its own: include it after cuda_dtype.cuh (to_float, from_float, load_pack_f32),
// or on the host after tests/cuda/block_emulator.hpp and then cuda_dtype.cuh, which the emulator turns
// into host code (tests/cuda/test_cuda_cores_emulated.cpp).
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "cuda/attention/attention_shape.hpp"
#include "cuda/attention/attention_tiles.hpp"  // kAttentionItemsPerTile
#include "cuda/attention/kv_cache_element.cuh"
#include "cuda/attention/tile_attention_args.cuh"

namespace cbatch::paged_attention_detail {

constexpr int kThreads = 128;
constexpr int kLanesPerGroup = 16;                                   // tx
constexpr int kItemGroups = kThreads / kLanesPerGroup;               // ty: 8
constexpr int kMaxRows = kAttentionItemsPerTile;                     // rows of a tile

// A CTA's items and key tile at head_dim HD: 64 items and 32 keys, or at 512 (Gemma 4's global layers) 32
// items and 16 keys, which keeps the shared memory (133 KB) under head_dim 256's (140 KB) and the registers
// of the weighted values (kItemsPerThread * HD / 16 = 128 floats a thread) at 256's. A tile's items past a
// CTA's are the next CTAs' (grid z, TileCta::item0): at 512 each CTA reads the tile's keys for half the items
// (or fewer) that a CTA at 256 serves; they come from L2 for all but the first.
template <int HD>
struct Geometry {
  static constexpr int kItems = HD > kWideHeadDim ? kAttentionItemsPerTile / 2 : kAttentionItemsPerTile;
  static constexpr int kKeysPerTile = HD > kWideHeadDim ? 16 : 32;
  static constexpr int kItemsPerThread = kItems / kItemGroups;            // 8 (4 at 512)
  static constexpr int kKeysPerThread = kKeysPerTile / kLanesPerGroup;     // 2 (1 at 512)
  static_assert(kItems % kItemGroups == 0 && kKeysPerTile % kLanesPerGroup == 0, "tile shape");
};

// The items a CTA serves at head_dim HD (attention_tile_slices' items_per_cta).
template <int HD>
constexpr int items_per_cta() { return Geometry<HD>::kItems; }

template <int HD>
constexpr size_t smem_bytes() {
  using G = Geometry<HD>;
  return sizeof(float) * (G::kItems * (HD + 1) + G::kKeysPerTile * (HD + 1) + G::kKeysPerTile * HD +
                          G::kItems * (G::kKeysPerTile + 1));
}

// Reductions over the 16 lanes of a half-warp: xor offsets below 16 never cross into the other half.
// Every lane of the warp must call them (full mask).
__device__ __forceinline__ float group_max(float v) {
#pragma unroll
  for (int offset = kLanesPerGroup / 2; offset > 0; offset >>= 1) {
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  }
  return v;
}

__device__ __forceinline__ float group_sum(float v) {
#pragma unroll
  for (int offset = kLanesPerGroup / 2; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// The items of the thread's group ty (items ty + kItemGroups i): their positions and, in the family build,
// their first visible keys. The valid ones form the prefix i < count. Invalid ones see only key 0 (position
// 0), which keeps their (unused) softmax state finite (in the family build, nothing where the tile starts
// past key 0: the softmax guard keeps it finite).
template <int HD>
struct ThreadItems {
  int pos[Geometry<HD>::kItemsPerThread];
  int first[Geometry<HD>::kItemsPerThread];  // the family build: each item's first visible key
  int count;
};

// The running softmax of the thread's items: max and sum over the keys so far, and the weighted values of
// its dims tx + 16 dd.
template <int HD>
struct ItemSoftmax {
  static constexpr int kItemsPerThread = Geometry<HD>::kItemsPerThread;
  static constexpr int kDimsPerThread = HD / kLanesPerGroup;
  float m[kItemsPerThread];                  // running max of the scaled scores
  float l[kItemsPerThread];                  // running sum of exp(score - m)
  float o[kItemsPerThread][kDimsPerThread];  // running sum of exp(score - m) * v, dims tx + 16 dd
};

// The tile's positions (s_pos, a row each) and q vectors (s_q, an item each, fp32; items past num_items get
// q = 0 and are never stored).
template <int HD, typename T, typename KV>
__device__ __forceinline__ void load_queries(const TileAttentionArgs<T, KV>& a, const TileCta& c, float* s_q,
                                             int* s_pos) {
  constexpr int kVec = Pack16<T>::kSize;
  constexpr int kPacksPerRow = HD / kVec;
  constexpr int kItems = Geometry<HD>::kItems;
  if (threadIdx.x < c.num_rows) s_pos[threadIdx.x] = a.positions[c.row_begin + threadIdx.x];
  for (int idx = threadIdx.x; idx < kItems * kPacksPerRow; idx += kThreads) {
    const int item = idx / kPacksPerRow;
    const int d0 = (idx % kPacksPerRow) * kVec;
    float vals[kVec];
    if (item < c.num_items) {
      load_pack_f32(tile_item_q<HD>(a, c, item) + d0, vals);
    } else {
#pragma unroll
      for (int e = 0; e < kVec; ++e) vals[e] = 0.0f;
    }
#pragma unroll
    for (int e = 0; e < kVec; ++e) s_q[item * (HD + 1) + d0 + e] = vals[e];
  }
}

template <int HD, bool FAMILY>
__device__ __forceinline__ ThreadItems<HD> thread_items(const int* s_pos, const TileCta& c, int ty, int window) {
  ThreadItems<HD> it;
  it.count = 0;
#pragma unroll
  for (int i = 0; i < Geometry<HD>::kItemsPerThread; ++i) {
    const int item = ty + kItemGroups * i;
    it.pos[i] = item < c.num_items ? s_pos[c.row_of(item)] : 0;
    it.first[i] = FAMILY ? window_first_key(it.pos[i], window) : 0;
    if (item < c.num_items) it.count = i + 1;
  }
  return it;
}

// K and V of the tile's keys key0 .. key0 + num_keys - 1 into shared memory, widened to fp32 (times the
// scales of an FP8 cache); zeros past num_keys.
template <int HD, typename T, typename KV>
__device__ __forceinline__ void load_kv_tile(const TileAttentionArgs<T, KV>& a, const TileCta& c, int key0,
                                             int num_keys, float k_scale, float v_scale, float* s_k, float* s_v) {
  constexpr int kKvVec = Pack16<KV>::kSize;
  constexpr int kKvPacksPerRow = HD / kKvVec;
  constexpr int kKeysPerTile = Geometry<HD>::kKeysPerTile;
  static_assert(HD % kKvVec == 0, "whole 16-byte packs of cache elements per row");
  for (int idx = threadIdx.x; idx < kKeysPerTile * kKvPacksPerRow; idx += kThreads) {
    const int key = idx / kKvPacksPerRow;
    const int d0 = (idx % kKvPacksPerRow) * kKvVec;
    float kf[kKvVec];
    float vf[kKvVec];
    if (key < num_keys) {
      const size_t offset = tile_cache_offset<HD>(a, c, key0 + key) + d0;
      load_kv_pack_f32(a.k_cache + offset, kf, k_scale);
      load_kv_pack_f32(a.v_cache + offset, vf, v_scale);
    } else {  // past the tile's last position: never read from the cache (it may hold garbage)
#pragma unroll
      for (int e = 0; e < kKvVec; ++e) kf[e] = vf[e] = 0.0f;
    }
#pragma unroll
    for (int e = 0; e < kKvVec; ++e) {
      s_k[key * (HD + 1) + d0 + e] = kf[e];
      s_v[key * HD + d0 + e] = vf[e];
    }
  }
}

// Scores of this thread's items against keys tx + 16 j of the tile: s = q.k.
template <int HD>
__device__ __forceinline__ void tile_scores(
    const float* s_q, const float* s_k, int my_items, int tx, int ty,
    float (&s)[Geometry<HD>::kItemsPerThread][Geometry<HD>::kKeysPerThread]) {
  constexpr int kItemsPerThread = Geometry<HD>::kItemsPerThread;
  constexpr int kKeysPerThread = Geometry<HD>::kKeysPerThread;
#pragma unroll
  for (int i = 0; i < kItemsPerThread; ++i) {
#pragma unroll
    for (int j = 0; j < kKeysPerThread; ++j) s[i][j] = 0.0f;
  }
#pragma unroll 8
  for (int d = 0; d < HD; ++d) {
    float k[kKeysPerThread];
#pragma unroll
    for (int j = 0; j < kKeysPerThread; ++j) k[j] = s_k[(tx + kLanesPerGroup * j) * (HD + 1) + d];
#pragma unroll
    for (int i = 0; i < kItemsPerThread; ++i) {
      if (i < my_items) {
        const float q = s_q[(ty + kItemGroups * i) * (HD + 1) + d];
#pragma unroll
        for (int j = 0; j < kKeysPerThread; ++j) s[i][j] += q * k[j];
      }
    }
  }
}

// Online softmax over the tile's keys from key0: all 32 lanes run this for all items (the shuffles need the
// full warp). Scales (in the family build softcaps) and masks the scores, writes the probabilities to s_p
// and rescales the running sum and values to the new max.
template <int HD, bool FAMILY, typename T, typename KV>
__device__ __forceinline__ void softmax_update(
    const TileAttentionArgs<T, KV>& a, const ThreadItems<HD>& it, int key0, int tx, int ty,
    float (&s)[Geometry<HD>::kItemsPerThread][Geometry<HD>::kKeysPerThread], ItemSoftmax<HD>& sm, float* s_p) {
  constexpr int kItemsPerThread = Geometry<HD>::kItemsPerThread;
  constexpr int kKeysPerThread = Geometry<HD>::kKeysPerThread;
  constexpr int kKeysPerTile = Geometry<HD>::kKeysPerTile;
#pragma unroll
  for (int i = 0; i < kItemsPerThread; ++i) {
    float tile_max = -INFINITY;
#pragma unroll
    for (int j = 0; j < kKeysPerThread; ++j) {
      const int key_pos = key0 + tx + kLanesPerGroup * j;
      if constexpr (FAMILY) {
        const bool visible = key_pos <= it.pos[i] && key_pos >= it.first[i];
        s[i][j] = visible ? softcapped(s[i][j] * a.scale, a.softcap) : -INFINITY;
      } else {
        s[i][j] = key_pos <= it.pos[i] ? s[i][j] * a.scale : -INFINITY;
      }
      tile_max = fmaxf(tile_max, s[i][j]);
    }
    // Finite: in the first tile key 0 is visible to every item, so m is finite from then on. In the
    // family build an item may see no key of a tile before its window: m_new stays -inf, and the
    // exponents are taken against 0 instead (alpha = 1 times nothing, p = 0).
    const float m_new = fmaxf(sm.m[i], group_max(tile_max));
    const float m_ref = FAMILY && m_new == -INFINITY ? 0.0f : m_new;
    const float alpha = expf(sm.m[i] - m_ref);  // 0 in the first tile, where m = -inf
    float p_sum = 0.0f;
#pragma unroll
    for (int j = 0; j < kKeysPerThread; ++j) {
      const float p = expf(s[i][j] - m_ref);  // masked keys: exp(-inf) = 0
      s_p[(ty + kItemGroups * i) * (kKeysPerTile + 1) + tx + kLanesPerGroup * j] = p;
      p_sum += p;
    }
    sm.l[i] = sm.l[i] * alpha + group_sum(p_sum);
    sm.m[i] = m_new;
#pragma unroll
    for (int dd = 0; dd < ItemSoftmax<HD>::kDimsPerThread; ++dd) sm.o[i][dd] *= alpha;
  }
}

// o += p v over the tile's num_keys keys, for the thread's valid items and its dims tx + 16 dd.
template <int HD>
__device__ __forceinline__ void accumulate_values(const float* s_v, const float* s_p, int num_keys, int my_items,
                                                  int tx, int ty, ItemSoftmax<HD>& sm) {
  constexpr int kDimsPerThread = ItemSoftmax<HD>::kDimsPerThread;
  constexpr int kItemsPerThread = Geometry<HD>::kItemsPerThread;
  constexpr int kKeysPerTile = Geometry<HD>::kKeysPerTile;
  for (int key = 0; key < num_keys; ++key) {
    float v[kDimsPerThread];
#pragma unroll
    for (int dd = 0; dd < kDimsPerThread; ++dd) v[dd] = s_v[key * HD + tx + kLanesPerGroup * dd];
#pragma unroll
    for (int i = 0; i < kItemsPerThread; ++i) {
      if (i < my_items) {
        const float p = s_p[(ty + kItemGroups * i) * (kKeysPerTile + 1) + key];
#pragma unroll
        for (int dd = 0; dd < kDimsPerThread; ++dd) sm.o[i][dd] += p * v[dd];
      }
    }
  }
}

// The outputs of the thread's valid items: o / l, or in the family build with sinks o times the sink's
// normalizer (the sink joins once, here).
template <int HD, bool FAMILY, typename T, typename KV>
__device__ __forceinline__ void write_items(const TileAttentionArgs<T, KV>& a, const TileCta& c, int my_items, int tx,
                                            int ty, const ItemSoftmax<HD>& sm) {
#pragma unroll
  for (int i = 0; i < Geometry<HD>::kItemsPerThread; ++i) {
    if (i < my_items) {
      const int item = ty + kItemGroups * i;
      const int q_head = c.q_head_of(item);
      T* dst = tile_item_out<HD>(a, c, item);
      // l >= 1: the maximum contributes exp(0). The family build joins the head's sink here, once.
      const float inv_l =
          FAMILY && a.sinks != nullptr ? sink_normalizer(sm.m[i], sm.l[i], a.sinks[q_head]) : 1.0f / sm.l[i];
#pragma unroll
      for (int dd = 0; dd < ItemSoftmax<HD>::kDimsPerThread; ++dd) {
        dst[tx + kLanesPerGroup * dd] = from_float<T>(sm.o[i][dd] * inv_l);
      }
    }
  }
}

// The body of paged_attention_kernel: smem is the CTA's smem_bytes<HD>() of dynamic shared memory. KV: the
// cache element (kv_cache_element.cuh), widened to fp32 (times its scale) as it goes to shared memory.
template <typename T, int HD, bool FAMILY, typename KV = T>
__device__ __forceinline__ void paged_attention_block(const TileAttentionArgs<T, KV>& a, float* smem) {
  using G = Geometry<HD>;
  constexpr int kItemsPerThread = G::kItemsPerThread;
  constexpr int kKeysPerThread = G::kKeysPerThread;
  constexpr int kKeysPerTile = G::kKeysPerTile;
  const float k_scale = kv_scale<KV>(a.k_scale);
  const float v_scale = kv_scale<KV>(a.v_scale);
  float* s_q = smem;                                 // (kItems, HD + 1)
  float* s_k = s_q + G::kItems * (HD + 1);           // (kKeysPerTile, HD + 1)
  float* s_v = s_k + kKeysPerTile * (HD + 1);        // (kKeysPerTile, HD)
  float* s_p = s_v + kKeysPerTile * HD;              // (kItems, kKeysPerTile + 1)
  __shared__ int s_pos[kMaxRows];                    // (rows of the tile)

  const TileCta c = tile_cta<HD, G::kItems>(a);
  if (c.num_items == 0) return;  // a slice past the tile's items (the whole CTA: no barrier is skipped)
  const int tx = threadIdx.x % kLanesPerGroup;
  const int ty = threadIdx.x / kLanesPerGroup;
  load_queries<HD>(a, c, s_q, s_pos);
  __syncthreads();

  // The keys the CTA's rows see (its slice's rows: c.row_of(0) .. c.row_of(num_items - 1)).
  const int first_row = c.row_of(0);
  const TileKeys keys = tile_keys<FAMILY>(s_pos + first_row, c.row_of(c.num_items - 1) + 1 - first_row, 1, a.window);
  const ThreadItems<HD> it = thread_items<HD, FAMILY>(s_pos, c, ty, a.window);
  ItemSoftmax<HD> sm;
#pragma unroll
  for (int i = 0; i < kItemsPerThread; ++i) {
    sm.m[i] = -INFINITY;
    sm.l[i] = 0.0f;
#pragma unroll
    for (int dd = 0; dd < ItemSoftmax<HD>::kDimsPerThread; ++dd) sm.o[i][dd] = 0.0f;
  }

  for (int key0 = keys.first; key0 <= keys.last; key0 += kKeysPerTile) {
    const int num_keys = min(kKeysPerTile, keys.last + 1 - key0);
    __syncthreads();  // every thread is done reading the previous tile's s_k, s_v, s_p
    load_kv_tile<HD>(a, c, key0, num_keys, k_scale, v_scale, s_k, s_v);
    __syncthreads();
    float s[kItemsPerThread][kKeysPerThread];
    tile_scores<HD>(s_q, s_k, it.count, tx, ty, s);
    softmax_update<HD, FAMILY>(a, it, key0, tx, ty, s, sm, s_p);
    __syncthreads();  // s_p rows are written and read by the same half-warp; a full barrier keeps it obvious
    accumulate_values<HD>(s_v, s_p, num_keys, it.count, tx, ty, sm);
  }
  write_items<HD, FAMILY>(a, c, it.count, tx, ty, sm);
}

}  // namespace cbatch::paged_attention_detail
