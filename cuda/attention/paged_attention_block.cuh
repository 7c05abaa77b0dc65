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
constexpr int kItems = kAttentionItemsPerTile;                       // 64
constexpr int kItemsPerThread = kItems / kItemGroups;                // 8
constexpr int kKeysPerTile = 32;
constexpr int kKeysPerThread = kKeysPerTile / kLanesPerGroup;        // 2
static_assert(kItems % kItemGroups == 0 && kKeysPerTile % kLanesPerGroup == 0, "tile shape");

template <int HD>
constexpr size_t smem_bytes() {
  return sizeof(float) * (kItems * (HD + 1) + kKeysPerTile * (HD + 1) + kKeysPerTile * HD +
                          kItems * (kKeysPerTile + 1));
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

// The body of paged_attention_kernel: smem is the CTA's smem_bytes<HD>() of dynamic shared memory. KV: the
// cache element (kv_cache_element.cuh), widened to fp32 (times its scale) as it goes to shared memory.
template <typename T, int HD, bool FAMILY, typename KV = T>
__device__ __forceinline__ void paged_attention_block(const TileAttentionArgs<T, KV>& a, float* smem) {
  constexpr int kDimsPerThread = HD / kLanesPerGroup;
  constexpr int kVec = Pack16<T>::kSize;
  constexpr int kPacksPerRow = HD / kVec;
  constexpr int kKvVec = Pack16<KV>::kSize;
  constexpr int kKvPacksPerRow = HD / kKvVec;
  static_assert(HD % kKvVec == 0, "whole 16-byte packs of cache elements per row");
  const float k_scale = kv_scale<KV>(a.k_scale);
  const float v_scale = kv_scale<KV>(a.v_scale);
  float* s_q = smem;                                 // (kItems, HD + 1)
  float* s_k = s_q + kItems * (HD + 1);              // (kKeysPerTile, HD + 1)
  float* s_v = s_k + kKeysPerTile * (HD + 1);        // (kKeysPerTile, HD)
  float* s_p = s_v + kKeysPerTile * HD;              // (kItems, kKeysPerTile + 1)
  __shared__ int s_pos[kItems];                      // (rows of the tile)

  const int seq = a.tile_seq[blockIdx.x];
  const int row_begin = a.tile_row[blockIdx.x];
  const int kv_head = blockIdx.y;
  const int num_rows = min(a.rows_per_tile, a.query_start[seq + 1] - row_begin);
  const int group = a.num_heads / a.num_kv_heads;
  const int num_items = num_rows * group;
  const int tx = threadIdx.x % kLanesPerGroup;
  const int ty = threadIdx.x / kLanesPerGroup;
  const size_t qkv_stride = static_cast<size_t>(a.num_heads + 2 * a.num_kv_heads) * HD;

  // Load the tile's positions and q vectors (items past num_items get q = 0 and are never stored).
  if (threadIdx.x < num_rows) s_pos[threadIdx.x] = a.positions[row_begin + threadIdx.x];
  for (int idx = threadIdx.x; idx < kItems * kPacksPerRow; idx += kThreads) {
    const int item = idx / kPacksPerRow;
    const int d0 = (idx % kPacksPerRow) * kVec;
    float vals[kVec];
    if (item < num_items) {
      const size_t row = static_cast<size_t>(row_begin + item / group);
      const int q_head = kv_head * group + item % group;
      load_pack_f32(a.qkv + row * qkv_stride + static_cast<size_t>(q_head) * HD + d0, vals);
    } else {
#pragma unroll
      for (int e = 0; e < kVec; ++e) vals[e] = 0.0f;
    }
#pragma unroll
    for (int e = 0; e < kVec; ++e) s_q[item * (HD + 1) + d0 + e] = vals[e];
  }
  __syncthreads();

  int max_pos = 0;
  for (int r = 0; r < num_rows; ++r) max_pos = max(max_pos, s_pos[r]);
  int key_start = 0;  // the family build: the first key of the tile's earliest window
  if constexpr (FAMILY) {
    int min_pos = max_pos;
    for (int r = 0; r < num_rows; ++r) min_pos = min(min_pos, s_pos[r]);
    key_start = window_first_key(min_pos, a.window);
  }
  // Valid items of this thread form a prefix i < my_items. Invalid ones see only key 0 (position 0),
  // which keeps their (unused) softmax state finite (in the family build, nothing where the tile starts
  // past key 0: the guard below keeps it finite).
  int my_pos[kItemsPerThread];
  int my_first[kItemsPerThread];  // the family build: each item's first visible key
  int my_items = 0;
#pragma unroll
  for (int i = 0; i < kItemsPerThread; ++i) {
    const int item = ty + kItemGroups * i;
    my_pos[i] = item < num_items ? s_pos[item / group] : 0;
    my_first[i] = FAMILY ? window_first_key(my_pos[i], a.window) : 0;
    if (item < num_items) my_items = i + 1;
  }

  float m[kItemsPerThread];                  // running max of the scaled scores
  float l[kItemsPerThread];                  // running sum of exp(score - m)
  float o[kItemsPerThread][kDimsPerThread];  // running sum of exp(score - m) * v, dims tx + 16 dd
#pragma unroll
  for (int i = 0; i < kItemsPerThread; ++i) {
    m[i] = -INFINITY;
    l[i] = 0.0f;
#pragma unroll
    for (int dd = 0; dd < kDimsPerThread; ++dd) o[i][dd] = 0.0f;
  }

  const int32_t* table = a.block_tables + static_cast<size_t>(seq) * a.max_blocks_per_seq;
  for (int key0 = key_start; key0 <= max_pos; key0 += kKeysPerTile) {
    const int num_keys = min(kKeysPerTile, max_pos + 1 - key0);
    __syncthreads();  // every thread is done reading the previous tile's s_k, s_v, s_p
    for (int idx = threadIdx.x; idx < kKeysPerTile * kKvPacksPerRow; idx += kThreads) {
      const int key = idx / kKvPacksPerRow;
      const int d0 = (idx % kKvPacksPerRow) * kKvVec;
      float kf[kKvVec];
      float vf[kKvVec];
      if (key < num_keys) {
        const int pos = key0 + key;
        const size_t block = static_cast<size_t>(table[pos / a.block_size]);
        const size_t offset =
            ((block * a.num_kv_heads + kv_head) * a.block_size + pos % a.block_size) * HD + d0;
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
    __syncthreads();

    // Scores of this thread's items against keys tx + 16 j of the tile.
    float s[kItemsPerThread][kKeysPerThread];
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

    // Online softmax: all 32 lanes run this for all items (the shuffles need the full warp).
#pragma unroll
    for (int i = 0; i < kItemsPerThread; ++i) {
      float tile_max = -INFINITY;
#pragma unroll
      for (int j = 0; j < kKeysPerThread; ++j) {
        const int key_pos = key0 + tx + kLanesPerGroup * j;
        if constexpr (FAMILY) {
          const bool visible = key_pos <= my_pos[i] && key_pos >= my_first[i];
          s[i][j] = visible ? softcapped(s[i][j] * a.scale, a.softcap) : -INFINITY;
        } else {
          s[i][j] = key_pos <= my_pos[i] ? s[i][j] * a.scale : -INFINITY;
        }
        tile_max = fmaxf(tile_max, s[i][j]);
      }
      // Finite: in the first tile key 0 is visible to every item, so m is finite from then on. In the
      // family build an item may see no key of a tile before its window: m_new stays -inf, and the
      // exponents are taken against 0 instead (alpha = 1 times nothing, p = 0).
      const float m_new = fmaxf(m[i], group_max(tile_max));
      const float m_ref = FAMILY && m_new == -INFINITY ? 0.0f : m_new;
      const float alpha = expf(m[i] - m_ref);  // 0 in the first tile, where m = -inf
      float p_sum = 0.0f;
#pragma unroll
      for (int j = 0; j < kKeysPerThread; ++j) {
        const float p = expf(s[i][j] - m_ref);  // masked keys: exp(-inf) = 0
        s_p[(ty + kItemGroups * i) * (kKeysPerTile + 1) + tx + kLanesPerGroup * j] = p;
        p_sum += p;
      }
      l[i] = l[i] * alpha + group_sum(p_sum);
      m[i] = m_new;
#pragma unroll
      for (int dd = 0; dd < kDimsPerThread; ++dd) o[i][dd] *= alpha;
    }
    __syncthreads();  // s_p rows are written and read by the same half-warp; a full barrier keeps it obvious

    for (int key = 0; key < num_keys; ++key) {
      float v[kDimsPerThread];
#pragma unroll
      for (int dd = 0; dd < kDimsPerThread; ++dd) v[dd] = s_v[key * HD + tx + kLanesPerGroup * dd];
#pragma unroll
      for (int i = 0; i < kItemsPerThread; ++i) {
        if (i < my_items) {
          const float p = s_p[(ty + kItemGroups * i) * (kKeysPerTile + 1) + key];
#pragma unroll
          for (int dd = 0; dd < kDimsPerThread; ++dd) o[i][dd] += p * v[dd];
        }
      }
    }
  }

#pragma unroll
  for (int i = 0; i < kItemsPerThread; ++i) {
    if (i < my_items) {
      const int item = ty + kItemGroups * i;
      const size_t row = static_cast<size_t>(row_begin + item / group);
      const int q_head = kv_head * group + item % group;
      T* dst = a.out + row * a.num_heads * HD + static_cast<size_t>(q_head) * HD;
      // l >= 1: the maximum contributes exp(0). The family build joins the head's sink here, once.
      const float inv_l = FAMILY && a.sinks != nullptr ? sink_normalizer(m[i], l[i], a.sinks[q_head]) : 1.0f / l[i];
#pragma unroll
      for (int dd = 0; dd < kDimsPerThread; ++dd) dst[tx + kLanesPerGroup * dd] = from_float<T>(o[i][dd] * inv_l);
    }
  }
}

}  // namespace cbatch::paged_attention_detail
