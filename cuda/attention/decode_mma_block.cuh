// The block code of the split tensor-core decode attention (decode_attention_mma.cu),
// DecodeKernel::kTensorCores16: the fallback where the stream kernel's shared memory does not fit the GPU.
//
// Same grid, arguments and outputs as decode_attention_kernel, 4 warps per CTA. Each warp walks its own
// 16-key tiles of the split (tiles warp, warp + 4, ...) through a private cp.async pipeline (2-4 stages)
// in shared memory, so the loop needs no block barrier, and does both products on the tensor cores with
// mma.m16n8k16 (fp32 accumulate): S = Q K^T with the group's q heads as the rows of A (rows past the group
// are zero), K as B straight from ldmatrix; the fp32 online softmax runs on the S fragments in registers
// (exp2 of pre-scaled scores); P, rounded to T, is already in A's layout for O += P V, V coming from
// ldmatrix.trans. At the end the warps' (m, l, o) are merged through shared memory. Rows are padded by 16
// bytes so that ldmatrix's eight row addresses fall in distinct banks.
// The family build (FAMILY, decode_args.cuh) walks the keys of the row's window and softcaps the scores.
// An FP8 cache (KV = Fp8E4M3): the stages hold E4M3 codes and after each wait the warp dequantizes its tile
// pair into one T tile pair that the ldmatrix loads read, as in the stream kernel (decode_stream_block.cuh).
//
// It uses no CUDA header of its own: include it after decode_kernels.cuh and cuda_dtype.cuh (the cp.async,
// ldmatrix, mma wrappers and from_float), or on the host after tests/cuda/block_emulator.hpp and
// tests/cuda/warp_mma_emulator.hpp, which emulate them.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "cuda/attention/decode_args.cuh"
#include "cuda/attention/decode_shape.hpp"

namespace cbatch::decode_detail {

constexpr int kMmaTile = 16;  // keys per warp tile
// The most shared memory a CTA takes: 99 KB, the opt-in limit of sm_86, sm_89 and sm_120, where the stream
// kernel's 2 stages at head_dim 128 (136 KB in bf16) do not fit and this kernel serves instead.
constexpr size_t kMmaMaxBytes = 99 * 1024;

// A warp's stages (K, V tile pairs of KV elements), then with an FP8 cache the converted T tile pair. The
// pipeline is 4 stages deep at head_dim <= 64 and 3 at 128 (as measured on an H200, 2026-11-26), one
// less where 3 would pass kMmaMaxBytes (a 16-bit cache at 128: 102 KB; 68 KB with 2).
template <typename T, int HD, typename KV = T>
struct MmaLayout {
  static constexpr int kLd = HD + 8;                               // padded T row the products read, elements
  static constexpr int kTileElems = kMmaTile * kLd;                // one K or V tile in T
  static constexpr int kStageLd = kFp8Kv<KV> ? HD + 16 : kLd;      // padded stage row, KV elements
  static constexpr int kStageTileElems = kMmaTile * kStageLd;
  static constexpr size_t kConvertedBytes = kFp8Kv<KV> ? sizeof(T) * 2 * kTileElems : 0;
  static constexpr size_t cta_bytes(int stages) {
    return kMmaWarps * (sizeof(KV) * 2 * stages * kStageTileElems + kConvertedBytes);
  }
  static constexpr int kDeepest = HD <= 64 ? 4 : 3;
  static constexpr int kStages = cta_bytes(kDeepest) <= kMmaMaxBytes ? kDeepest : kDeepest - 1;
  static constexpr size_t kStageBytes = sizeof(KV) * 2 * kStages * kStageTileElems;
  static constexpr size_t kWarpBytes = kStageBytes + kConvertedBytes;
  static constexpr size_t kBytes = kMmaWarps * kWarpBytes;
  static_assert(kBytes <= kMmaMaxBytes, "fits every GPU the stream kernel may not fit");
  // After its loop a warp leaves (o (kDecodeMaxGroup, HD), m, l (kDecodeMaxGroup)) in its own space.
  static_assert(sizeof(float) * kDecodeMaxGroup * (HD + 2) <= kWarpBytes, "warp result space");
  static_assert(kStageBytes % 16 == 0 && kWarpBytes % 16 == 0, "16-byte aligned stages and tiles");
};

// A warp's copies of keys [key0, key0 + kMmaTile) into one stage; keys at or past key_end become zero rows.
template <typename T, int HD, typename KV>
__device__ __forceinline__ void mma_load_tile(const DecodeArgs<T, KV>& a, const int32_t* table, int kv_head, int key0,
                                              int key_end, KV* s_k, KV* s_v, int lane) {
  using L = MmaLayout<T, HD, KV>;
  constexpr int kPieces = HD * static_cast<int>(sizeof(KV)) / 16;  // 16-byte pieces per row
  constexpr int kVec = 16 / static_cast<int>(sizeof(KV));
  static_assert(kMmaTile * kPieces % 32 == 0, "whole pieces per lane");
#pragma unroll
  for (int j = 0; j < kMmaTile * kPieces / 32; ++j) {
    const int i = lane + 32 * j;
    const int k = i / kPieces, piece = i % kPieces;
    const int key = key0 + k;
    const bool valid = key < key_end;
    const size_t offset = valid ? cache_offset(a, table, kv_head, key, HD) + piece * kVec : 0;
    cp_async16_zfill(s_k + k * L::kStageLd + piece * kVec, a.k_cache + offset, valid ? 16 : 0);
    cp_async16_zfill(s_v + k * L::kStageLd + piece * kVec, a.v_cache + offset, valid ? 16 : 0);
  }
}

constexpr float kMmaLog2e = 1.4426950408889634f;  // the scores are kept in log2 units (exp2 of pre-scaled scores)

// Q as A fragments: row g is q head kv_head * group + g (zero past the group), columns d (2 t.., 8 + 2 t..
// of each k step).
template <int HD, typename T, typename KV>
__device__ __forceinline__ void load_q_fragments(const DecodeArgs<T, KV>& a, const DecodeCta& cta, int g, int t,
                                                 uint32_t (&q)[HD / 16][2]) {
  const size_t qkv_stride = static_cast<size_t>(a.num_heads + 2 * a.num_kv_heads) * HD;
  const T* q_row = a.qkv + cta.row * qkv_stride + static_cast<size_t>(cta.kv_head * cta.group + g) * HD;
#pragma unroll
  for (int kk = 0; kk < HD / 16; ++kk) {
    q[kk][0] = g < cta.group ? *reinterpret_cast<const uint32_t*>(q_row + kk * 16 + 2 * t) : 0u;
    q[kk][1] = g < cta.group ? *reinterpret_cast<const uint32_t*>(q_row + kk * 16 + 8 + 2 * t) : 0u;
  }
}

// S = Q K^T over the tile's 16 keys: n tiles of 8 keys; one ldmatrix.x4 gives the B fragments of two k steps.
template <int HD, typename T, typename KV>
__device__ __forceinline__ void mma_scores(const uint32_t (&q)[HD / 16][2], const T* s_k, int lane,
                                           float (&s)[kMmaTile / 8][4]) {
  using L = MmaLayout<T, HD, KV>;
#pragma unroll
  for (int n = 0; n < kMmaTile / 8; ++n) {
    s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < HD / 16; kk += 2) {
      uint32_t b[4];
      ldmatrix_x4(b, s_k + (n * 8 + lane % 8) * L::kLd + kk * 16 + (lane / 8) * 8);
      mma_16816<T>(s[n], q[kk][0], q[kk][1], b[0], b[1]);
      mma_16816<T>(s[n], q[kk + 1][0], q[kk + 1][1], b[2], b[3]);
    }
  }
}

// Online softmax of row g over the tile of keys from key0 (the four threads of a quad share a row): the
// scores masked at key_end and scaled to log2 units (softcapped first in the family build), the running max
// m_run and the thread's part l_part of the running sum, O rescaled; P, rounded to T, as the A fragment
// halves of O += P V (keys n * 8 + 2 t + {0, 1}).
template <int HD, bool FAMILY, typename T, typename KV>
__device__ __forceinline__ void mma_softmax(const DecodeArgs<T, KV>& a, int key0, int key_end, int t, float scale_log2,
                                            float (&s)[kMmaTile / 8][4], float& m_run, float& l_part,
                                            float (&o)[HD / 8][4], uint32_t (&p)[kMmaTile / 8]) {
  float tile_max = -INFINITY;
#pragma unroll
  for (int n = 0; n < kMmaTile / 8; ++n) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const bool valid = key0 + n * 8 + 2 * t + e < key_end;
      if constexpr (FAMILY) {
        s[n][e] = valid ? softcapped(s[n][e] * a.scale, a.softcap) * kMmaLog2e : -INFINITY;
      } else {
        s[n][e] = valid ? s[n][e] * scale_log2 : -INFINITY;
      }
      tile_max = fmaxf(tile_max, s[n][e]);
    }
  }
  tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
  tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
  const float m_new = fmaxf(m_run, tile_max);  // finite: every tile holds a valid key
  const float alpha = exp2f(m_run - m_new);    // 0 on the first tile
  m_run = m_new;
  l_part *= alpha;
#pragma unroll
  for (int n = 0; n < HD / 8; ++n) {
    o[n][0] *= alpha;
    o[n][1] *= alpha;
  }
#pragma unroll
  for (int n = 0; n < kMmaTile / 8; ++n) {
    const float p0 = exp2f(s[n][0] - m_new), p1 = exp2f(s[n][1] - m_new);
    l_part += p0 + p1;
    p[n] = pack2<T>(p0, p1);
  }
}

// O += P V: k steps of 16 keys; one ldmatrix.x4.trans gives the B fragments of two dim tiles.
template <int HD, typename T, typename KV>
__device__ __forceinline__ void mma_values(const uint32_t (&p)[kMmaTile / 8], const T* s_v, int lane,
                                           float (&o)[HD / 8][4]) {
  using L = MmaLayout<T, HD, KV>;
#pragma unroll
  for (int kk = 0; kk < kMmaTile / 16; ++kk) {
#pragma unroll
    for (int n = 0; n < HD / 8; n += 2) {
      uint32_t b[4];
      ldmatrix_x4_trans(b, s_v + (kk * 16 + ((lane / 8) % 2) * 8 + lane % 8) * L::kLd + (n + lane / 16) * 8);
      mma_16816<T>(o[n], p[2 * kk], p[2 * kk + 1], b[0], b[1]);
      mma_16816<T>(o[n + 1], p[2 * kk], p[2 * kk + 1], b[2], b[3]);
    }
  }
}

// The warp's result into its own stage space s_warp: o (kDecodeMaxGroup, HD), then m and l per row.
template <int HD>
__device__ __forceinline__ void store_warp_result(unsigned char* s_warp, int group, int g, int t,
                                                  const float (&o)[HD / 8][4], float m_run, float l_part) {
  float* r_o = reinterpret_cast<float*>(s_warp);
  float* r_m = r_o + kDecodeMaxGroup * HD;
  float* r_l = r_m + kDecodeMaxGroup;
  float l = l_part + __shfl_xor_sync(0xffffffffu, l_part, 1);
  l += __shfl_xor_sync(0xffffffffu, l, 2);
  if (g < group) {
#pragma unroll
    for (int n = 0; n < HD / 8; ++n) {
      r_o[g * HD + n * 8 + 2 * t] = o[n][0];
      r_o[g * HD + n * 8 + 2 * t + 1] = o[n][1];
    }
    if (t == 0) {
      r_m[g] = m_run;
      r_l[g] = l;
    }
  }
}

// Merges the warps' results (weights 2^(m_w - M); a warp without tiles has m = -inf, l = 0, o = 0) and writes
// out (with the sinks in the family build), or with several splits the CTA's (o, m, l) for the merge.
template <int HD, bool FAMILY, typename T, typename KV>
__device__ __forceinline__ void merge_warps(const DecodeArgs<T, KV>& a, const DecodeCta& cta,
                                            const unsigned char* s_stages) {
  using L = MmaLayout<T, HD, KV>;
  const int kv_head = cta.kv_head, group = cta.group;
  const bool is_split = gridDim.z > 1;
  const size_t partial = (static_cast<size_t>(blockIdx.x) * gridDim.y + kv_head) * gridDim.z + blockIdx.z;
  const float* w_base = reinterpret_cast<const float*>(s_stages);
  const size_t w_stride = L::kWarpBytes / sizeof(float);
  for (int e = threadIdx.x; e < group * HD; e += kMmaWarps * 32) {
    const int h = e / HD, d = e % HD;
    float m_max = -INFINITY;
#pragma unroll
    for (int w = 0; w < kMmaWarps; ++w) m_max = fmaxf(m_max, w_base[w * w_stride + kDecodeMaxGroup * HD + h]);
    float sum_o = 0.0f, sum_l = 0.0f;
    if (m_max != -INFINITY) {  // -inf only for a split without keys: it contributes nothing
#pragma unroll
      for (int w = 0; w < kMmaWarps; ++w) {
        const float* r = w_base + w * w_stride;
        const float weight = exp2f(r[kDecodeMaxGroup * HD + h] - m_max);
        sum_o += weight * r[h * HD + d];
        sum_l += weight * r[kDecodeMaxGroup * HD + kDecodeMaxGroup + h];
      }
    }
    if (is_split) {
      a.partial_o[(partial * group + h) * HD + d] = sum_o;
      if (d == 0) {  // m in natural-log units of the scaled score, as decode_combine_kernel expects
        a.partial_ml[(partial * group + h) * 2] = m_max * (1.0f / kMmaLog2e);
        a.partial_ml[(partial * group + h) * 2 + 1] = sum_l;
      }
    } else {
      a.out[static_cast<size_t>(cta.row) * a.num_heads * HD + static_cast<size_t>(kv_head * group + h) * HD + d] =
          from_float<T>(attention_output(sum_o, m_max * (1.0f / kMmaLog2e), sum_l, FAMILY ? a.sinks : nullptr,
                                         kv_head * group + h));
    }
  }
}

// The body of decode_attention_mma_kernel: s_stages is the CTA's MmaLayout::kBytes of dynamic shared memory.
template <typename T, int HD, bool FAMILY, typename KV = T>
__device__ __forceinline__ void mma_block(const DecodeArgs<T, KV>& a, unsigned char* s_stages) {
  using L = MmaLayout<T, HD, KV>;
  const DecodeCta cta = decode_cta<T, FAMILY, KV>(a);
  const int key_begin = cta.key_begin, key_end = cta.key_end;
  const int num_tiles = key_begin < key_end ? (key_end - key_begin + kMmaTile - 1) / kMmaTile : 0;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;  // fragment row (q head in the group) and column pair
  const int my_tiles = num_tiles > warp ? (num_tiles - warp + kMmaWarps - 1) / kMmaWarps : 0;
  unsigned char* s_warp = s_stages + warp * L::kWarpBytes;
  KV* s_stage0 = reinterpret_cast<KV*>(s_warp);
  T* s_converted = reinterpret_cast<T*>(s_warp + L::kStageBytes);  // (2, kMmaTile, kLd): FP8 caches only
  const float k_scale = kv_scale<KV>(a.k_scale);
  const float v_scale = kv_scale<KV>(a.v_scale);
  auto stage_k = [&](int i) { return s_stage0 + (i % L::kStages) * 2 * L::kStageTileElems; };
  auto tile_key = [&](int i) { return key_begin + (warp + i * kMmaWarps) * kMmaTile; };

#pragma unroll
  for (int i = 0; i < L::kStages - 1; ++i) {
    if (i < my_tiles) {
      mma_load_tile<T, HD>(a, cta.table, cta.kv_head, tile_key(i), key_end, stage_k(i),
                           stage_k(i) + L::kStageTileElems, lane);
    }
    cp_async_commit();
  }

  uint32_t q[HD / 16][2];
  load_q_fragments<HD>(a, cta, g, t, q);
  const float scale_log2 = a.scale * kMmaLog2e;
  float m_run = -INFINITY;  // running max of row g's scaled scores (log2 units)
  float l_part = 0.0f;      // this thread's part of row g's running sum
  float o[HD / 8][4];       // O fragments: row g, dims n * 8 + 2 t + {0, 1} in [0], [1] ([2], [3]: zero rows)
#pragma unroll
  for (int n = 0; n < HD / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;

  for (int i = 0; i < my_tiles; ++i) {
    const int ahead = i + L::kStages - 1;
    if (ahead < my_tiles) {
      mma_load_tile<T, HD>(a, cta.table, cta.kv_head, tile_key(ahead), key_end, stage_k(ahead),
                           stage_k(ahead) + L::kStageTileElems, lane);
    }
    cp_async_commit();
    cp_async_wait<L::kStages - 1>();
    __syncwarp();
    const T* s_k = kv_tiles_for_mma<kMmaTile, HD>(stage_k(i), L::kStageLd, L::kStageTileElems, s_converted, L::kLd,
                                                  L::kTileElems, k_scale, v_scale, lane);
    float s[kMmaTile / 8][4];
    mma_scores<HD, T, KV>(q, s_k, lane, s);
    uint32_t p[kMmaTile / 8];
    mma_softmax<HD, FAMILY>(a, tile_key(i), key_end, t, scale_log2, s, m_run, l_part, o, p);
    mma_values<HD, T, KV>(p, s_k + L::kTileElems, lane, o);
    __syncwarp();  // this stage is refilled kStages - 1 iterations on (the converted tiles at the next)
  }
  cp_async_wait<0>();  // only empty groups can be left
  __syncwarp();

  store_warp_result<HD>(s_warp, cta.group, g, t, o, m_run, l_part);
  __syncthreads();
  merge_warps<HD, FAMILY>(a, cta, s_stages);
}

}  // namespace cbatch::decode_detail
