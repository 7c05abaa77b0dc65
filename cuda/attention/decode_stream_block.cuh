// The block code of the stream decode attention (decode_attention_stream.cu), DecodeKernel::kStream.
//
// The schedule of decode_stream.hpp: CTAs of kMmaWarps independent warps (no block barrier); warp w walks
// the tiles [warp_begin(w), warp_begin(w + 1)) of the list of all decode items' tiles with two cursors, a
// loader kStages - 1 tiles ahead (cp.async into the warp's stages; each lane looks up the cache row of one
// key, the others take it by shuffle) and the compute cursor. Items end and begin inside the loop without
// draining the pipeline. The products are transposed against decode_attention_mma_kernel: S^T = K Q^T and
// O^T += V^T P^T, with 16 keys (or 16 dims) as the mma's rows and the group's q heads as its 8 columns, so
// a group of 4 heads uses half of each mma instead of a quarter. In the accumulator layout a thread holds
// heads 2 t and 2 t + 1 of rows g and g + 8; the max and the sum of a head reduce over the 8 lanes of a
// column. P^T goes from that layout to the B operand's with movmatrix (an 8x8 transpose in registers).
// The family build (FAMILY, decode_args.cuh): an item's tiles start at its row's window's first key (the
// tile list is built for the layer's window, decode_stream::build_tile_start), and scores are softcapped.
// An FP8 cache (KV = Fp8E4M3): the stages hold E4M3 codes (cp.async moves half the bytes of bf16), and after
// each wait the warp dequantizes its tile's K and V (times their scales) into one tile pair in T, which the
// ldmatrix loads below read unchanged. Why a converted copy rather than converting in the fragments: the
// A fragments of K come from 4 and those of V^T (two keys' bytes of one dim) from 8 scattered shared loads
// per mma instead of one ldmatrix.x4, each followed by a conversion; the copy costs 2 * 32 * (HD + 8) T per
// warp (17 KB at head_dim 128: 176 KB a CTA with 3 stages of codes, against 209 KB for 3 stages of bf16;
// 96 KB at 64) and one 8-code load, 8 conversions and one 16-byte store per 8 elements, with no more live
// registers than one 16-byte pack. Not measured: a GPU run decides.
//
// It uses no CUDA header of its own: include it after decode_kernels.cuh and cuda_dtype.cuh (the cp.async,
// ldmatrix, mma, movmatrix wrappers and from_float), or on the host after tests/cuda/block_emulator.hpp and
// tests/cuda/warp_mma_emulator.hpp, which emulate them.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "cuda/attention/decode_args.cuh"
#include "cuda/attention/decode_stream.hpp"

namespace cbatch::decode_detail {

// STAGES tiles in flight per warp: 3 where the shared memory allows (Hopper: 209 KB a CTA at head_dim 128,
// 110 KB at 64), else 2 (139 KB and 73 KB: the A100, and sm_86/89 at head_dim 64). A warp's stages (K, V
// tile pairs of KV elements), then with an FP8 cache the converted T tile pair the products read.
template <typename T, int HD, int STAGES, typename KV = T>
struct StreamLayout {
  static_assert(STAGES >= 2, "one tile computed while the next one loads");
  static constexpr int kLd = HD + 8;  // padded T row the products read, elements (ldmatrix rows in distinct banks)
  static constexpr int kTileElems = decode_stream::kTile * kLd;
  static constexpr int kStages = STAGES;
  static constexpr int kStageLd = kFp8Kv<KV> ? HD + 16 : kLd;  // padded stage row, KV elements (16-byte aligned)
  static constexpr int kStageTileElems = decode_stream::kTile * kStageLd;
  static constexpr size_t kStageBytes = sizeof(KV) * 2 * kStages * kStageTileElems;
  static constexpr size_t kConvertedBytes = kFp8Kv<KV> ? sizeof(T) * 2 * kTileElems : 0;
  static constexpr size_t kWarpBytes = kStageBytes + kConvertedBytes;
  static constexpr size_t kBytes = kMmaWarps * kWarpBytes;
  static_assert(kStageBytes % 16 == 0, "the converted tiles start 16-byte aligned");
};

// What a cursor needs of its sequence: the query row, the keys key_first..key_end - 1 (key_first is the
// window's first key in the family build, else 0), the block table.
struct StreamSeq {
  int row, key_end;
  const int32_t* table;
  int key_first;
};

template <typename T, bool FAMILY, typename KV>
__device__ __forceinline__ StreamSeq stream_seq(const DecodeArgs<T, KV>& a, int decode_index) {
  const int seq = a.decode_seqs[decode_index];
  StreamSeq s;
  s.row = a.query_start[seq];
  s.key_end = a.positions[s.row] + 1;
  if constexpr (FAMILY) s.key_first = window_first_key(a.positions[s.row], a.window);  // Llama's never reads it
  s.table = a.block_tables + static_cast<size_t>(seq) * a.max_blocks_per_seq;
  return s;
}

// The first key of an item's tile `tile`.
template <bool FAMILY>
__device__ __forceinline__ int stream_tile_key(const StreamSeq& s, int tile) {
  if constexpr (FAMILY) {
    return s.key_first + tile * decode_stream::kTile;
  } else {
    return tile * decode_stream::kTile;
  }
}

// A warp's copies of keys [key0, key0 + kTile) of (s, kv_head) into one stage; keys at or past key_end
// become zero rows. Lane l finds the cache row of key key0 + l (the only block-table lookup).
template <typename T, int HD, int STAGES, typename KV>
__device__ __forceinline__ void stream_load_tile(const DecodeArgs<T, KV>& a, const StreamSeq& s, int kv_head, int key0,
                                                 KV* s_k, KV* s_v, int lane) {
  using L = StreamLayout<T, HD, STAGES, KV>;
  constexpr int kPieces = HD * static_cast<int>(sizeof(KV)) / 16;  // 16-byte pieces per row
  constexpr int kVec = 16 / static_cast<int>(sizeof(KV));
  static_assert(decode_stream::kTile == 32, "one key per lane");
  const int key = key0 + lane;
  const int cache_row = key < s.key_end
                            ? (s.table[key / a.block_size] * a.block_heads() + kv_head) * a.block_size + key % a.block_size
                            : -1;
#pragma unroll
  for (int j = 0; j < decode_stream::kTile * kPieces / 32; ++j) {
    const int i = lane + 32 * j;
    const int k = i / kPieces, piece = i % kPieces;
    const int r = __shfl_sync(0xffffffffu, cache_row, k);
    const size_t offset = r >= 0 ? static_cast<size_t>(r) * HD + piece * kVec : 0;
    cp_async16_zfill(s_k + k * L::kStageLd + piece * kVec, a.k_cache + offset, r >= 0 ? 16 : 0);
    cp_async16_zfill(s_v + k * L::kStageLd + piece * kVec, a.v_cache + offset, r >= 0 ? 16 : 0);
  }
}



// The body of decode_attention_stream_kernel: s_stream is the CTA's StreamLayout::kBytes of dynamic shared
// memory.
template <typename T, int HD, int STAGES, bool FAMILY, typename KV = T>
__device__ __forceinline__ void stream_block(const DecodeArgs<T, KV>& a, const StreamArgs& st,
                                             unsigned char* s_stream) {
  using L = StreamLayout<T, HD, STAGES, KV>;
  using decode_stream::kTile;
  constexpr int kSteps = HD / 16;  // k steps of S^T = K Q^T; m tiles (16 dims) of O^T
  constexpr float kLog2e = 1.4426950408889634f;

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int w = blockIdx.x * kMmaWarps + warp;
  if (w >= st.num_warps) return;  // the last CTA's spare warps (no block barrier follows)
  const int g = lane / 4, t = lane % 4;  // accumulator row g (and g + 8), columns (q heads) 2 t, 2 t + 1
  const int group = a.num_heads / a.num_kv_heads;
  const int64_t t0 = decode_stream::warp_begin(w, st.num_tiles, st.num_warps);
  const int64_t t1 = decode_stream::warp_begin(w + 1, st.num_tiles, st.num_warps);
  unsigned char* s_warp = s_stream + warp * L::kWarpBytes;
  KV* s_stages = reinterpret_cast<KV*>(s_warp);
  T* s_converted = reinterpret_cast<T*>(s_warp + L::kStageBytes);  // (2, kTile, kLd): FP8 caches only
  const float k_scale = kv_scale<KV>(a.k_scale);
  const float v_scale = kv_scale<KV>(a.v_scale);
  // The stage of a tile: its index in the range modulo kStages (an int: a range is far below 2^31 tiles).
  auto stage_k = [&](int64_t tile) {
    return s_stages + (static_cast<int>(tile - t0) % L::kStages) * 2 * L::kStageTileElems;
  };

  decode_stream::TileCursor ld = decode_stream::locate(t0, st.tile_start, st.num_seqs, a.num_kv_heads);
  decode_stream::TileCursor cp = ld;
  StreamSeq ld_seq = stream_seq<T, FAMILY>(a, ld.seq);
  StreamSeq cp_seq = ld_seq;
  auto load_next = [&]() {  // one commit group per call, empty past the range
    if (ld.t < t1) {
      KV* s_k = stage_k(ld.t);
      stream_load_tile<T, HD, STAGES>(a, ld_seq, ld.kv_head, stream_tile_key<FAMILY>(ld_seq, ld.tile), s_k,
                                      s_k + L::kStageTileElems, lane);
      if (ld.advance(st.tile_start, st.num_seqs, a.num_kv_heads) && ld.t < t1) {
        ld_seq = stream_seq<T, FAMILY>(a, ld.seq);
      }
    }
    cp_async_commit();
  };
#pragma unroll
  for (int i = 0; i < L::kStages - 1; ++i) load_next();

  // Q^T as B fragments: column g is q head kv_head * group + g (zero past the group), rows d.
  uint32_t q[kSteps][2];
  auto load_q = [&]() {
    const size_t qkv_stride = static_cast<size_t>(a.num_heads + 2 * a.num_kv_heads) * HD;
    const T* q_row = a.qkv + cp_seq.row * qkv_stride + static_cast<size_t>(cp.kv_head * group + g) * HD;
#pragma unroll
    for (int kk = 0; kk < kSteps; ++kk) {
      q[kk][0] = g < group ? *reinterpret_cast<const uint32_t*>(q_row + kk * 16 + 2 * t) : 0u;
      q[kk][1] = g < group ? *reinterpret_cast<const uint32_t*>(q_row + kk * 16 + 8 + 2 * t) : 0u;
    }
  };
  const float scale_log2 = a.scale * kLog2e;
  float m_run[2], l_part[2];  // per column 2 t + e: running max (log2 units), this thread's part of the sum
  float o[kSteps][4];         // O^T: dims dt * 16 + g ([0], [1]) and + 8 ([2], [3]); heads 2 t ([0], [2]), 2 t + 1
  auto reset = [&]() {
    m_run[0] = m_run[1] = -INFINITY;
    l_part[0] = l_part[1] = 0.0f;
#pragma unroll
    for (int dt = 0; dt < kSteps; ++dt) o[dt][0] = o[dt][1] = o[dt][2] = o[dt][3] = 0.0f;
  };
  // The piece of cp's item that ends with this tile: the output itself, or a partial result in its slot.
  auto write_piece = [&]() {
    float l[2];
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      l[e] = l_part[e];
      l[e] += __shfl_xor_sync(0xffffffffu, l[e], 4);
      l[e] += __shfl_xor_sync(0xffffffffu, l[e], 8);
      l[e] += __shfl_xor_sync(0xffffffffu, l[e], 16);
    }
    const int slot = decode_stream::piece_slot(cp.item_begin(), cp.item_end(), t0, t1, w);
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int h = 2 * t + e;
      if (h >= group) continue;
      if (slot < 0) {
        T* out = a.out + static_cast<size_t>(cp_seq.row) * a.num_heads * HD + static_cast<size_t>(cp.kv_head * group + h) * HD;
        const float inv_l = FAMILY && a.sinks != nullptr
                                ? sink_normalizer(m_run[e] * (1.0f / kLog2e), l[e], a.sinks[cp.kv_head * group + h])
                                : 1.0f / l[e];
#pragma unroll
        for (int dt = 0; dt < kSteps; ++dt) {
          out[dt * 16 + g] = from_float<T>(o[dt][e] * inv_l);
          out[dt * 16 + g + 8] = from_float<T>(o[dt][2 + e] * inv_l);
        }
      } else {
        float* po = a.partial_o + (static_cast<size_t>(slot) * group + h) * HD;
#pragma unroll
        for (int dt = 0; dt < kSteps; ++dt) {
          po[dt * 16 + g] = o[dt][e];
          po[dt * 16 + g + 8] = o[dt][2 + e];
        }
        if (g == 0) {  // m in natural-log units of the scaled score, as the combine expects
          a.partial_ml[(static_cast<size_t>(slot) * group + h) * 2] = m_run[e] * (1.0f / kLog2e);
          a.partial_ml[(static_cast<size_t>(slot) * group + h) * 2 + 1] = l[e];
        }
      }
    }
  };
  load_q();
  reset();

  for (int64_t tile = t0; tile < t1; ++tile) {
    load_next();
    cp_async_wait<L::kStages - 1>();
    __syncwarp();
    const T* s_k = kv_tiles_for_mma<kTile, HD>(stage_k(tile), L::kStageLd, L::kStageTileElems, s_converted, L::kLd,
                                               L::kTileElems, k_scale, v_scale, lane);
    const T* s_v = s_k + L::kTileElems;
    const int key0 = stream_tile_key<FAMILY>(cp_seq, cp.tile);

    // S^T = K Q^T: two m tiles of 16 keys; A (keys x dims) by ldmatrix.x4 from the key rows.
    float score[2][4];
#pragma unroll
    for (int mt = 0; mt < 2; ++mt) {
      score[mt][0] = score[mt][1] = score[mt][2] = score[mt][3] = 0.0f;
#pragma unroll
      for (int kk = 0; kk < kSteps; ++kk) {
        uint32_t k_frag[4];
        ldmatrix_x4(k_frag, s_k + (mt * 16 + ((lane / 8) % 2) * 8 + lane % 8) * L::kLd + kk * 16 + (lane / 16) * 8);
        mma_16816<T>(score[mt], k_frag[0], k_frag[1], k_frag[2], k_frag[3], q[kk][0], q[kk][1]);
      }
    }
    // Online softmax per column (q head) over this tile's keys: rows g, g + 8 of both m tiles, then the
    // 8 lanes of the column.
    float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const bool valid = key0 + mt * 16 + (i / 2) * 8 + g < cp_seq.key_end;
        if constexpr (FAMILY) {
          score[mt][i] = valid ? softcapped(score[mt][i] * a.scale, a.softcap) * kLog2e : -INFINITY;
        } else {
          score[mt][i] = valid ? score[mt][i] * scale_log2 : -INFINITY;
        }
        tile_max[i % 2] = fmaxf(tile_max[i % 2], score[mt][i]);
      }
    }
    float alpha[2];
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      tile_max[e] = fmaxf(tile_max[e], __shfl_xor_sync(0xffffffffu, tile_max[e], 4));
      tile_max[e] = fmaxf(tile_max[e], __shfl_xor_sync(0xffffffffu, tile_max[e], 8));
      tile_max[e] = fmaxf(tile_max[e], __shfl_xor_sync(0xffffffffu, tile_max[e], 16));
      const float m_new = fmaxf(m_run[e], tile_max[e]);  // finite: every tile holds a valid key
      alpha[e] = exp2f(m_run[e] - m_new);                // 0 on a piece's first tile
      m_run[e] = m_new;
      l_part[e] *= alpha[e];
    }
#pragma unroll
    for (int dt = 0; dt < kSteps; ++dt) {
      o[dt][0] *= alpha[0];
      o[dt][1] *= alpha[1];
      o[dt][2] *= alpha[0];
      o[dt][3] *= alpha[1];
    }
    // P (rounded to T) as the B operand of O^T += V^T P^T: k step mt holds keys mt * 16 + 0..15; b0 the
    // first 8 (accumulator row g), b1 the next 8 (row g + 8), each transposed by movmatrix.
    uint32_t p[2][2];
#pragma unroll
    for (int mt = 0; mt < 2; ++mt) {
      const float p0 = exp2f(score[mt][0] - m_run[0]), p1 = exp2f(score[mt][1] - m_run[1]);
      const float p2 = exp2f(score[mt][2] - m_run[0]), p3 = exp2f(score[mt][3] - m_run[1]);
      l_part[0] += p0 + p2;
      l_part[1] += p1 + p3;
      p[mt][0] = movmatrix_trans(pack2<T>(p0, p1));
      p[mt][1] = movmatrix_trans(pack2<T>(p2, p3));
    }
    // O^T += V^T P^T: m tiles of 16 dims; A (dims x keys) by ldmatrix.x4.trans from the value rows.
#pragma unroll
    for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
      for (int dt = 0; dt < kSteps; ++dt) {
        uint32_t v_frag[4];
        ldmatrix_x4_trans(v_frag, s_v + (mt * 16 + (lane / 16) * 8 + lane % 8) * L::kLd + dt * 16 + ((lane / 8) % 2) * 8);
        mma_16816<T>(o[dt], v_frag[0], v_frag[1], v_frag[2], v_frag[3], p[mt][0], p[mt][1]);
      }
    }
    __syncwarp();  // this stage is refilled kStages - 1 tiles on (and the converted tiles at the next tile)

    const bool item_done = tile + 1 == cp.item_end();
    if (item_done || tile + 1 == t1) {
      write_piece();
      reset();
    }
    if (tile + 1 < t1) {
      if (cp.advance(st.tile_start, st.num_seqs, a.num_kv_heads)) cp_seq = stream_seq<T, FAMILY>(a, cp.seq);
      if (item_done) load_q();
    }
  }
  cp_async_wait<0>();  // only empty groups can be left
}

// Merges the pieces of the items cut by warp ranges. Grid num_warps CTAs of head_dim threads: CTA w
// merges the item whose head piece warp w holds, if that piece ends the item (see decode_stream.hpp);
// every piece holds at least one key, so each m is finite.
template <typename T, typename KV>
__device__ __forceinline__ void stream_combine_block(const DecodeArgs<T, KV>& a, const StreamArgs& st) {
  const int w = blockIdx.x;
  const int64_t t0 = decode_stream::warp_begin(w, st.num_tiles, st.num_warps);
  const int64_t t1 = decode_stream::warp_begin(w + 1, st.num_tiles, st.num_warps);
  const decode_stream::TileCursor first = decode_stream::locate(t0, st.tile_start, st.num_seqs, a.num_kv_heads);
  const int w0 = decode_stream::merging_warp_first_piece(first, t0, t1, st.num_tiles, st.num_warps);
  if (w0 < 0) return;
  const int group = a.num_heads / a.num_kv_heads;
  const int hd = blockDim.x, d = threadIdx.x;
  const int row = a.query_start[a.decode_seqs[first.seq]];
  auto slot = [&](int v) { return v == w0 ? 2 * w0 + 1 : 2 * v; };
  for (int h = 0; h < group; ++h) {
    float m = -INFINITY;
    for (int v = w0; v <= w; ++v) m = fmaxf(m, a.partial_ml[(static_cast<size_t>(slot(v)) * group + h) * 2]);
    float l = 0.0f, o = 0.0f;
    for (int v = w0; v <= w; ++v) {
      const size_t p = static_cast<size_t>(slot(v)) * group + h;
      const float weight = expf(a.partial_ml[p * 2] - m);
      l += weight * a.partial_ml[p * 2 + 1];
      o += weight * a.partial_o[p * hd + d];
    }
    a.out[static_cast<size_t>(row) * a.num_heads * hd + static_cast<size_t>(first.kv_head * group + h) * hd + d] =
        from_float<T>(attention_output(o, m, l, a.sinks, first.kv_head * group + h));  // the sink joins once
  }
}

}  // namespace cbatch::decode_detail
