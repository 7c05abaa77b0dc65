// Decode attention: one query row per sequence, all q heads of a kv head in one CTA. Two kernels: this
// CUDA-core one (every dtype and head_dim) and, further down, a tensor-core one for bf16/fp16.
//
// Grid (num_seqs, num_kv_heads, num_splits), 128 threads. The CTA walks its key range in chunks of 128
// keys, one key per thread: a thread loads its key's K and V rows (16-byte loads through the block table),
// keeps V in shared memory (sizeof(T) * 128 * head_dim bytes) and scores K against the group's q vectors
// (fp32, pre-scaled, in shared memory, read as broadcasts). The
// chunk's max and sum per head are reduced over the block (online softmax, fp32), the probabilities go to
// shared memory, and the threads switch roles: thread t accumulates the dim pair t % (head_dim / 2) of every
// head over every (128 / (head_dim / 2))-th key of the chunk, reading value rows from shared memory as
// pairs; the key groups' sums are added at the end. With one split
// the CTA writes out = o / l; with several it writes (o, m, l) and decode_combine_kernel merges them.
#include "cuda/decode_attention.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>

#include "cuda/cuda_check.hpp"
#include "cuda/cuda_dtype.cuh"
#include "cuda/kernel_smem.hpp"

namespace cbatch {
namespace {

constexpr int kThreads = kDecodeKeysPerChunk;  // one key per thread
constexpr int kWarps = kThreads / 32;

template <typename T>
struct DecodeArgs {
  T* out;                       // (num_tokens, num_heads * hd)
  const T* qkv;                 // (num_tokens, (num_heads + 2 * num_kv_heads) * hd)
  const T* k_cache;             // (num_blocks, num_kv_heads, block_size, hd)
  const T* v_cache;             // (num_blocks, num_kv_heads, block_size, hd)
  const int32_t* positions;     // (num_tokens)
  const int32_t* query_start;   // (num_seqs_in_batch + 1)
  const int32_t* block_tables;  // (num_seqs_in_batch, max_blocks_per_seq)
  const int32_t* decode_seqs;   // (num_seqs) batch sequence index of each decode row
  float* partial_o;             // (num_seqs * num_kv_heads * num_splits, group, hd) when split
  float* partial_ml;            // (num_seqs * num_kv_heads * num_splits, group, 2) when split
  int max_blocks_per_seq;
  int num_heads;
  int num_kv_heads;
  int block_size;
  int keys_per_split;
  float scale;
};

template <typename T>
__device__ __forceinline__ size_t cache_offset(const DecodeArgs<T>& a, const int32_t* table, int kv_head, int pos,
                                               int hd) {
  const size_t block = static_cast<size_t>(table[pos / a.block_size]);
  return ((block * a.num_kv_heads + kv_head) * a.block_size + pos % a.block_size) * hd;
}

// What one CTA of either decode kernel covers: the only row `row` of sequence decode_seqs[blockIdx.x],
// kv head blockIdx.y (and its `group` q heads), keys [key_begin, key_end) of split blockIdx.z.
struct DecodeCta {
  int kv_head, group, row, key_begin, key_end;
  const int32_t* table;  // the sequence's block table
};

template <typename T>
__device__ __forceinline__ DecodeCta decode_cta(const DecodeArgs<T>& a) {
  const int seq = a.decode_seqs[blockIdx.x];
  DecodeCta c;
  c.kv_head = blockIdx.y;
  c.group = a.num_heads / a.num_kv_heads;
  c.row = a.query_start[seq];
  c.key_begin = blockIdx.z * a.keys_per_split;
  c.key_end = min(a.positions[c.row] + 1, c.key_begin + a.keys_per_split);
  c.table = a.block_tables + static_cast<size_t>(seq) * a.max_blocks_per_seq;
  return c;
}

// Two consecutive elements widened to fp32 (4- or 8-byte aligned).
__device__ __forceinline__ float2 load2_f32(const float* p) { return *reinterpret_cast<const float2*>(p); }
__device__ __forceinline__ float2 load2_f32(const __nv_bfloat16* p) {
  return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(p));
}
__device__ __forceinline__ float2 load2_f32(const __half* p) { return __half22float2(*reinterpret_cast<const __half2*>(p)); }

// Dynamic shared memory: the chunk's value rows, reused at the end for the per-key-group outputs.
template <typename T, int HD>
constexpr size_t decode_smem_bytes() {
  const size_t values = sizeof(T) * kThreads * HD;
  const size_t outputs = sizeof(float) * (kThreads / (HD / 2)) * kDecodeMaxGroup * HD;
  return values > outputs ? values : outputs;
}

template <typename T, int HD>
__global__ void __launch_bounds__(kThreads) decode_attention_kernel(const DecodeArgs<T> a) {
  constexpr int kVec = Pack16<T>::kSize;
  constexpr int kPairs = HD / 2;                                   // output dim pairs
  constexpr int kKeyGroups = kThreads / kPairs;                    // threads sharing one dim pair
  __shared__ float s_q[kDecodeMaxGroup][HD];                       // q * scale
  __shared__ float s_p[kDecodeMaxGroup][kThreads];                 // probabilities of the chunk
  __shared__ float s_red[kDecodeMaxGroup][kWarps];                 // per-warp max, then sum
  __shared__ float s_m[kDecodeMaxGroup], s_l[kDecodeMaxGroup], s_alpha[kDecodeMaxGroup];
  extern __shared__ __align__(16) unsigned char s_dynamic[];
  T* s_v = reinterpret_cast<T*>(s_dynamic);                        // (kThreads, HD) value rows of the chunk
  float* s_o = reinterpret_cast<float*>(s_dynamic);                // (kKeyGroups, group, HD) after the loop

  const DecodeCta cta = decode_cta(a);
  const int kv_head = cta.kv_head, group = cta.group, row = cta.row;
  const int key_begin = cta.key_begin, key_end = cta.key_end;
  const int32_t* table = cta.table;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const size_t qkv_stride = static_cast<size_t>(a.num_heads + 2 * a.num_kv_heads) * HD;

  for (int i = tid; i < group * HD; i += kThreads) {
    const int g = i / HD, d = i % HD;
    s_q[g][d] = to_float(a.qkv[row * qkv_stride + static_cast<size_t>(kv_head * group + g) * HD + d]) * a.scale;
  }
  if (tid < group) {
    s_m[tid] = -INFINITY;
    s_l[tid] = 0.0f;
  }
  const int pair = tid % kPairs, key_group = tid / kPairs;
  float2 o[kDecodeMaxGroup];  // this thread's dims (2 pair, 2 pair + 1) of each head, over its keys
#pragma unroll
  for (int g = 0; g < kDecodeMaxGroup; ++g) o[g] = make_float2(0.0f, 0.0f);
  __syncthreads();

  for (int chunk = key_begin; chunk < key_end; chunk += kThreads) {
    const int key = chunk + tid;
    float s[kDecodeMaxGroup];
#pragma unroll
    for (int g = 0; g < kDecodeMaxGroup; ++g) s[g] = key < key_end ? 0.0f : -INFINITY;
    if (key < key_end) {
      const size_t offset = cache_offset(a, table, kv_head, key, HD);
      const T* k_row = a.k_cache + offset;
      // This key's value row goes to shared memory for the weighted sum below (loads issued early).
#pragma unroll
      for (int d = 0; d < HD; d += kVec) {
        *reinterpret_cast<Pack16<T>*>(s_v + tid * HD + d) = *reinterpret_cast<const Pack16<T>*>(a.v_cache + offset + d);
      }
#pragma unroll
      for (int d = 0; d < HD; d += kVec) {
        float kf[kVec];
        load_pack_f32(k_row + d, kf);
#pragma unroll
        for (int g = 0; g < kDecodeMaxGroup; ++g) {
          if (g < group) {
#pragma unroll
            for (int e = 0; e < kVec; ++e) s[g] += s_q[g][d + e] * kf[e];
          }
        }
      }
    }
    // Chunk max per head over the block, then the new running max and the rescale factor.
#pragma unroll
    for (int g = 0; g < kDecodeMaxGroup; ++g) {
      if (g < group) {
        const float m = warp_max(s[g]);
        if (lane == 0) s_red[g][warp] = m;
      }
    }
    __syncthreads();
    if (tid < group) {
      float m = s_m[tid];
#pragma unroll
      for (int w = 0; w < kWarps; ++w) m = fmaxf(m, s_red[tid][w]);
      s_alpha[tid] = expf(s_m[tid] - m);  // 0 on the first chunk (m was -inf), m is finite from then on
      s_m[tid] = m;
    }
    __syncthreads();
#pragma unroll
    for (int g = 0; g < kDecodeMaxGroup; ++g) {
      if (g < group) {
        const float p = key < key_end ? expf(s[g] - s_m[g]) : 0.0f;
        s_p[g][tid] = p;
        const float sum = warp_sum(p);
        if (lane == 0) s_red[g][warp] = sum;
      }
    }
    __syncthreads();
    if (tid < group) {
      float sum = 0.0f;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) sum += s_red[tid][w];
      s_l[tid] = s_l[tid] * s_alpha[tid] + sum;
    }
    // Weighted values: this thread's dim pair for every head, over keys key_group, key_group + kKeyGroups...
#pragma unroll
    for (int g = 0; g < kDecodeMaxGroup; ++g) {
      if (g < group) {
        o[g].x *= s_alpha[g];
        o[g].y *= s_alpha[g];
      }
    }
    const int num_keys = min(kThreads, key_end - chunk);
    for (int k = key_group; k < num_keys; k += kKeyGroups) {
      const float2 v = load2_f32(s_v + k * HD + 2 * pair);
#pragma unroll
      for (int g = 0; g < kDecodeMaxGroup; ++g) {
        if (g < group) {
          const float p = s_p[g][k];
          o[g].x += p * v.x;
          o[g].y += p * v.y;
        }
      }
    }
    __syncthreads();  // s_v, s_p, s_red and s_alpha are rewritten by the next chunk
  }

  // Sum the key groups' partial outputs (s_v's space is free now).
#pragma unroll
  for (int g = 0; g < kDecodeMaxGroup; ++g) {
    if (g < group) {
      s_o[(key_group * group + g) * HD + 2 * pair] = o[g].x;
      s_o[(key_group * group + g) * HD + 2 * pair + 1] = o[g].y;
    }
  }
  __syncthreads();

  const bool is_split = gridDim.z > 1;
  const size_t partial = (static_cast<size_t>(blockIdx.x) * gridDim.y + kv_head) * gridDim.z + blockIdx.z;
  for (int e = tid; e < group * HD; e += kThreads) {
    const int g = e / HD, d = e % HD;
    float sum = 0.0f;
#pragma unroll
    for (int kg = 0; kg < kKeyGroups; ++kg) sum += s_o[(kg * group + g) * HD + d];
    if (is_split) {
      a.partial_o[(partial * group + g) * HD + d] = sum;
    } else {
      a.out[static_cast<size_t>(row) * a.num_heads * HD + static_cast<size_t>(kv_head * group + g) * HD + d] =
          from_float<T>(sum / s_l[g]);
    }
  }
  if (is_split && tid < group) {
    a.partial_ml[(partial * group + tid) * 2] = s_m[tid];
    a.partial_ml[(partial * group + tid) * 2 + 1] = s_l[tid];
  }
}

// Merges the splits of one (sequence, q head): out = sum_s e^(m_s - M) o_s / sum_s e^(m_s - M) l_s.
// Grid (num_seqs, num_heads), head_dim threads. Split 0 always holds key 0, so M is finite; an empty
// split has m = -inf, l = 0 and o = 0 and adds nothing.
template <typename T>
__global__ void decode_combine_kernel(const DecodeArgs<T> a, int num_splits) {
  const int seq = a.decode_seqs[blockIdx.x];
  const int head = blockIdx.y;
  const int group = a.num_heads / a.num_kv_heads;
  const int kv_head = head / group, g = head % group;
  const int hd = blockDim.x;
  const size_t first = (static_cast<size_t>(blockIdx.x) * a.num_kv_heads + kv_head) * num_splits;
  float m = -INFINITY;
  for (int s = 0; s < num_splits; ++s) m = fmaxf(m, a.partial_ml[((first + s) * group + g) * 2]);
  float l = 0.0f, o = 0.0f;
  for (int s = 0; s < num_splits; ++s) {
    const size_t p = (first + s) * group + g;
    const float w = expf(a.partial_ml[p * 2] - m);
    l += w * a.partial_ml[p * 2 + 1];
    o += w * a.partial_o[p * hd + threadIdx.x];
  }
  const int row = a.query_start[seq];
  a.out[static_cast<size_t>(row) * a.num_heads * hd + static_cast<size_t>(head) * hd + threadIdx.x] = from_float<T>(o / l);
}

// ---- Tensor-core decode attention (bf16, fp16; head_dim 32, 64, 128) ---------------------------------
//
// Same grid, arguments and outputs as decode_attention_kernel, 4 warps per CTA. Each warp walks its own
// 32-key (or 16-key) tiles of the split (tiles warp, warp + 4, ...) through a private cp.async pipeline
// (2-4 stages) in shared memory, so the loop needs no block barrier, and does both products on the
// tensor cores with mma.m16n8k16 (fp32 accumulate): S = Q K^T with the group's q heads as the rows of A
// (rows past the group are zero), K as B straight from ldmatrix; the fp32 online softmax runs on the S
// fragments in registers (exp2 of pre-scaled scores); P, rounded to T, is already in A's layout for
// O += P V, V coming from ldmatrix.trans. At the end the warps' (m, l, o) are merged through shared
// memory. Rows are padded by 16 bytes so that ldmatrix's eight row addresses fall in distinct banks.
constexpr int kMmaWarps = 4;

// TILE keys per warp tile: 32 (the default), or 16 (DecodeKernel::kTensorCores16: half the shared memory
// per stage, one stage more, so that more CTAs fit on an SM; not measured yet).
template <typename T, int HD, int TILE>
struct MmaLayout {
  static_assert(TILE == 16 || TILE == 32, "warp tiles of 16 or 32 keys");
  static constexpr int kLd = HD + 8;                               // padded row, elements
  static constexpr int kTileElems = TILE * kLd;                    // one K or V tile
  static constexpr int kStages = (HD <= 64 ? 3 : 2) + (TILE == 16 ? 1 : 0);
  static constexpr int kWarpElems = 2 * kStages * kTileElems;      // a warp's stages (K, V per stage)
  static constexpr size_t kBytes = sizeof(T) * kMmaWarps * kWarpElems;
  // After its loop a warp leaves (o (kDecodeMaxGroup, HD), m, l (kDecodeMaxGroup)) in its own stage space.
  static_assert(sizeof(float) * kDecodeMaxGroup * (HD + 2) <= sizeof(T) * kWarpElems, "warp result space");
};

__device__ __forceinline__ uint32_t smem_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared through cp.async (L1 bypassed); src_bytes 0 writes zeros instead.
__device__ __forceinline__ void cp_async16_zfill(void* smem, const void* gmem, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_address(smem)), "l"(gmem),
               "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* row_address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_address(row_address)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* row_address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_address(row_address)));
}

// c += A B for one m16n8k16 tile; A's rows 8..15 (registers a1, a3) are zero here.
template <typename T>
__device__ __forceinline__ void mma_16816(float (&c)[4], uint32_t a0, uint32_t a2, uint32_t b0, uint32_t b1) {
  const uint32_t zero = 0;
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(zero), "r"(a2), "r"(zero), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(zero), "r"(a2), "r"(zero), "r"(b0), "r"(b1));
  }
}

// Two fp32 values as one register of T pairs, the first in the low half.
template <typename T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&v);
  } else {
    const __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&v);
  }
}

// A warp's copies of keys [key0, key0 + TILE) into one stage; keys at or past key_end become zero rows.
template <typename T, int HD, int TILE>
__device__ __forceinline__ void mma_load_tile(const DecodeArgs<T>& a, const int32_t* table, int kv_head, int key0,
                                              int key_end, T* s_k, T* s_v, int lane) {
  using L = MmaLayout<T, HD, TILE>;
  constexpr int kPieces = HD * static_cast<int>(sizeof(T)) / 16;  // 16-byte pieces per row
  constexpr int kVec = 16 / static_cast<int>(sizeof(T));
  static_assert(TILE * kPieces % 32 == 0, "whole pieces per lane");
#pragma unroll
  for (int j = 0; j < TILE * kPieces / 32; ++j) {
    const int i = lane + 32 * j;
    const int k = i / kPieces, piece = i % kPieces;
    const int key = key0 + k;
    const bool valid = key < key_end;
    const size_t offset = valid ? cache_offset(a, table, kv_head, key, HD) + piece * kVec : 0;
    cp_async16_zfill(s_k + k * L::kLd + piece * kVec, a.k_cache + offset, valid ? 16 : 0);
    cp_async16_zfill(s_v + k * L::kLd + piece * kVec, a.v_cache + offset, valid ? 16 : 0);
  }
}

template <typename T, int HD, int TILE>
__global__ void __launch_bounds__(kMmaWarps * 32) decode_attention_mma_kernel(const DecodeArgs<T> a) {
  using L = MmaLayout<T, HD, TILE>;
  constexpr int kKSteps = HD / 16;  // k steps of S = Q K^T
  constexpr int kDimTiles = HD / 8;  // n tiles of O
  constexpr float kLog2e = 1.4426950408889634f;
  extern __shared__ __align__(128) unsigned char s_stages[];

  const DecodeCta cta = decode_cta(a);
  const int kv_head = cta.kv_head, group = cta.group, row = cta.row;
  const int key_begin = cta.key_begin, key_end = cta.key_end;
  const int32_t* table = cta.table;
  const int num_tiles = key_begin < key_end ? (key_end - key_begin + TILE - 1) / TILE : 0;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;  // fragment row (q head in the group) and column pair
  const int my_tiles = num_tiles > warp ? (num_tiles - warp + kMmaWarps - 1) / kMmaWarps : 0;
  T* s_warp = reinterpret_cast<T*>(s_stages) + warp * L::kWarpElems;
  auto stage_k = [&](int i) { return s_warp + (i % L::kStages) * 2 * L::kTileElems; };
  auto tile_key = [&](int i) { return key_begin + (warp + i * kMmaWarps) * TILE; };

#pragma unroll
  for (int i = 0; i < L::kStages - 1; ++i) {
    if (i < my_tiles) {
      mma_load_tile<T, HD, TILE>(a, table, kv_head, tile_key(i), key_end, stage_k(i), stage_k(i) + L::kTileElems, lane);
    }
    cp_async_commit();
  }

  // Q as A fragments: row g is q head kv_head * group + g (zero past the group), columns d.
  uint32_t q[kKSteps][2];
  {
    const size_t qkv_stride = static_cast<size_t>(a.num_heads + 2 * a.num_kv_heads) * HD;
    const T* q_row = a.qkv + row * qkv_stride + static_cast<size_t>(kv_head * group + g) * HD;
#pragma unroll
    for (int kk = 0; kk < kKSteps; ++kk) {
      q[kk][0] = g < group ? *reinterpret_cast<const uint32_t*>(q_row + kk * 16 + 2 * t) : 0u;
      q[kk][1] = g < group ? *reinterpret_cast<const uint32_t*>(q_row + kk * 16 + 8 + 2 * t) : 0u;
    }
  }
  const float scale_log2 = a.scale * kLog2e;
  float m_run = -INFINITY;  // running max of row g's scaled scores (log2 units)
  float l_part = 0.0f;      // this thread's part of row g's running sum
  float o[kDimTiles][4];    // O fragments: row g, dims n * 8 + 2 t + {0, 1} in [0], [1] ([2], [3]: zero rows)
#pragma unroll
  for (int n = 0; n < kDimTiles; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;

  for (int i = 0; i < my_tiles; ++i) {
    const int ahead = i + L::kStages - 1;
    if (ahead < my_tiles) {
      mma_load_tile<T, HD, TILE>(a, table, kv_head, tile_key(ahead), key_end, stage_k(ahead),
                                 stage_k(ahead) + L::kTileElems, lane);
    }
    cp_async_commit();
    cp_async_wait<L::kStages - 1>();
    __syncwarp();
    const T* s_k = stage_k(i);
    const T* s_v = s_k + L::kTileElems;
    const int key0 = tile_key(i);

    // S = Q K^T: n tiles of 8 keys; one ldmatrix.x4 gives the B fragments of two k steps.
    float s[TILE / 8][4];
#pragma unroll
    for (int n = 0; n < TILE / 8; ++n) {
      s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
      for (int kk = 0; kk < kKSteps; kk += 2) {
        uint32_t b[4];
        ldmatrix_x4(b, s_k + (n * 8 + lane % 8) * L::kLd + kk * 16 + (lane / 8) * 8);
        mma_16816<T>(s[n], q[kk][0], q[kk][1], b[0], b[1]);
        mma_16816<T>(s[n], q[kk + 1][0], q[kk + 1][1], b[2], b[3]);
      }
    }
    // Online softmax of row g over this tile (the four threads of a quad share a row).
    float tile_max = -INFINITY;
#pragma unroll
    for (int n = 0; n < TILE / 8; ++n) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const bool valid = key0 + n * 8 + 2 * t + e < key_end;
        s[n][e] = valid ? s[n][e] * scale_log2 : -INFINITY;
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
    for (int n = 0; n < kDimTiles; ++n) {
      o[n][0] *= alpha;
      o[n][1] *= alpha;
    }
    uint32_t p[TILE / 8];  // P of row g as A fragment halves: keys n * 8 + 2 t + {0, 1}
#pragma unroll
    for (int n = 0; n < TILE / 8; ++n) {
      const float p0 = exp2f(s[n][0] - m_new), p1 = exp2f(s[n][1] - m_new);
      l_part += p0 + p1;
      p[n] = pack2<T>(p0, p1);
    }
    // O += P V: k steps of 16 keys; one ldmatrix.x4.trans gives the B fragments of two dim tiles.
#pragma unroll
    for (int kk = 0; kk < TILE / 16; ++kk) {
#pragma unroll
      for (int n = 0; n < kDimTiles; n += 2) {
        uint32_t b[4];
        ldmatrix_x4_trans(b, s_v + (kk * 16 + ((lane / 8) % 2) * 8 + lane % 8) * L::kLd + (n + lane / 16) * 8);
        mma_16816<T>(o[n], p[2 * kk], p[2 * kk + 1], b[0], b[1]);
        mma_16816<T>(o[n + 1], p[2 * kk], p[2 * kk + 1], b[2], b[3]);
      }
    }
    __syncwarp();  // this stage is refilled two (or one) iterations on
  }
  cp_async_wait<0>();  // only empty groups can be left
  __syncwarp();

  // The warp's result into its own stage space: o (kDecodeMaxGroup, HD), then m and l per row.
  float* r_o = reinterpret_cast<float*>(s_warp);
  float* r_m = r_o + kDecodeMaxGroup * HD;
  float* r_l = r_m + kDecodeMaxGroup;
  float l = l_part + __shfl_xor_sync(0xffffffffu, l_part, 1);
  l += __shfl_xor_sync(0xffffffffu, l, 2);
  if (g < group) {
#pragma unroll
    for (int n = 0; n < kDimTiles; ++n) {
      r_o[g * HD + n * 8 + 2 * t] = o[n][0];
      r_o[g * HD + n * 8 + 2 * t + 1] = o[n][1];
    }
    if (t == 0) {
      r_m[g] = m_run;
      r_l[g] = l;
    }
  }
  __syncthreads();

  // Merge the warps: weights 2^(m_w - M); a warp without tiles has m = -inf, l = 0, o = 0.
  const bool is_split = gridDim.z > 1;
  const size_t partial = (static_cast<size_t>(blockIdx.x) * gridDim.y + kv_head) * gridDim.z + blockIdx.z;
  const float* w_base = reinterpret_cast<const float*>(s_stages);
  const size_t w_stride = L::kWarpElems * sizeof(T) / sizeof(float);
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
        a.partial_ml[(partial * group + h) * 2] = m_max * (1.0f / kLog2e);
        a.partial_ml[(partial * group + h) * 2 + 1] = sum_l;
      }
    } else {
      a.out[static_cast<size_t>(row) * a.num_heads * HD + static_cast<size_t>(kv_head * group + h) * HD + d] =
          from_float<T>(sum_o / sum_l);
    }
  }
}

// One decode launch: grid (num_seqs, num_kv_heads, num_splits), then the merge of the splits.
template <typename T>
void launch(void (*kernel)(DecodeArgs<T>), int threads, size_t smem_bytes, const DecodeArgs<T>& args, int num_seqs,
            int num_splits, int hd, cudaStream_t stream) {
  allow_dynamic_shared_memory(reinterpret_cast<const void*>(kernel), smem_bytes);
  const dim3 grid(static_cast<unsigned>(num_seqs), static_cast<unsigned>(args.num_kv_heads),
                  static_cast<unsigned>(num_splits));
  kernel<<<grid, threads, smem_bytes, stream>>>(args);
  CUDA_CHECK_LAUNCH();
  if (num_splits > 1) {
    decode_combine_kernel<T><<<dim3(num_seqs, args.num_heads), hd, 0, stream>>>(args, num_splits);
    CUDA_CHECK_LAUNCH();
  }
}

template <typename T, int HD>
void launch_cuda_cores(const DecodeArgs<T>& args, int num_seqs, int num_splits, cudaStream_t stream) {
  launch<T>(decode_attention_kernel<T, HD>, kThreads, decode_smem_bytes<T, HD>(), args, num_seqs, num_splits, HD,
            stream);
}

template <typename T, int TILE>
void launch_tensor_cores(const DecodeArgs<T>& args, int num_seqs, int num_splits, int hd, cudaStream_t stream) {
  auto run = [&](auto head_dim) {
    constexpr int HD = decltype(head_dim)::value;
    launch<T>(decode_attention_mma_kernel<T, HD, TILE>, kMmaWarps * 32, MmaLayout<T, HD, TILE>::kBytes, args,
              num_seqs, num_splits, HD, stream);
  };
  switch (hd) {
    case 32: return run(std::integral_constant<int, 32>{});
    case 64: return run(std::integral_constant<int, 64>{});
    case 128: return run(std::integral_constant<int, 128>{});
    default: throw Error("decode_attention: no tensor-core kernel for head_dim " + std::to_string(hd));
  }
}

}  // namespace

bool decode_tensor_cores_support(int head_dim) { return head_dim == 32 || head_dim == 64 || head_dim == 128; }

DecodeSplit choose_decode_split(int num_seqs, int num_kv_heads, int max_seq_len, int target_ctas, int max_partials) {
  DecodeSplit split;
  const int chunks = std::max(1, (max_seq_len + kDecodeKeysPerChunk - 1) / kDecodeKeysPerChunk);
  const int base = std::max(1, num_seqs * num_kv_heads);
  int splits = std::min({chunks, (target_ctas + base - 1) / base, std::max(1, max_partials / base)});
  splits = std::max(1, splits);
  const int chunks_per_split = (chunks + splits - 1) / splits;
  split.num_splits = (chunks + chunks_per_split - 1) / chunks_per_split;  // no empty trailing splits
  split.keys_per_split = chunks_per_split * kDecodeKeysPerChunk;
  return split;
}

template <typename T>
void decode_attention(T* d_out, const T* d_qkv, const T* d_k_cache, const T* d_v_cache, const int32_t* d_positions,
                      const int32_t* d_query_start, const int32_t* d_block_tables, int max_blocks_per_seq,
                      const int32_t* d_decode_seqs, int num_seqs, const DecodeSplit& split, float* d_partial_o,
                      float* d_partial_ml, int max_partials, const AttentionShape& shape, cudaStream_t stream,
                      DecodeKernel kernel) {
  const int hd = shape.head_dim;
  const int group = shape.num_kv_heads > 0 ? shape.num_heads / shape.num_kv_heads : 0;
  const bool ok = num_seqs >= 0 && num_seqs <= 2147483647 && group >= 1 && group <= kDecodeMaxGroup &&
                  shape.num_heads % shape.num_kv_heads == 0 && shape.num_kv_heads <= 65535 && shape.block_size > 0 &&
                  split.num_splits >= 1 && split.num_splits <= 65535 && split.keys_per_split > 0 &&
                  split.keys_per_split % kDecodeKeysPerChunk == 0 &&
                  (split.num_splits == 1 || (static_cast<int64_t>(num_seqs) * shape.num_kv_heads * split.num_splits <=
                                                 max_partials && d_partial_o != nullptr && d_partial_ml != nullptr));
  if (!ok) {
    throw Error("decode_attention: bad sizes num_seqs=" + std::to_string(num_seqs) + " heads=" +
                std::to_string(shape.num_heads) + "/" + std::to_string(shape.num_kv_heads) + " splits=" +
                std::to_string(split.num_splits) + " keys_per_split=" + std::to_string(split.keys_per_split) +
                " max_partials=" + std::to_string(max_partials));
  }
  if (num_seqs == 0) return;
  const DecodeArgs<T> args{d_out, d_qkv, d_k_cache, d_v_cache, d_positions, d_query_start, d_block_tables,
                           d_decode_seqs, d_partial_o, d_partial_ml, max_blocks_per_seq, shape.num_heads,
                           shape.num_kv_heads, shape.block_size, split.keys_per_split,
                           1.0f / std::sqrt(static_cast<float>(hd))};
  if (kernel != DecodeKernel::kCudaCores) {
    if constexpr (std::is_same_v<T, float>) {
      throw Error("decode_attention: the tensor-core kernels take bf16 or fp16");
    } else if (kernel == DecodeKernel::kTensorCores16) {
      return launch_tensor_cores<T, 16>(args, num_seqs, split.num_splits, hd, stream);
    } else {
      return launch_tensor_cores<T, 32>(args, num_seqs, split.num_splits, hd, stream);
    }
  }
  switch (hd) {
    case 16: return launch_cuda_cores<T, 16>(args, num_seqs, split.num_splits, stream);
    case 32: return launch_cuda_cores<T, 32>(args, num_seqs, split.num_splits, stream);
    case 64: return launch_cuda_cores<T, 64>(args, num_seqs, split.num_splits, stream);
    case 128: return launch_cuda_cores<T, 128>(args, num_seqs, split.num_splits, stream);
    default: throw Error("decode_attention: head_dim " + std::to_string(hd) + " is not 16, 32, 64 or 128");
  }
}

#define CBATCH_INSTANTIATE_DECODE(T)                                                                        \
  template void decode_attention<T>(T*, const T*, const T*, const T*, const int32_t*, const int32_t*,        \
                                    const int32_t*, int, const int32_t*, int, const DecodeSplit&, float*,    \
                                    float*, int, const AttentionShape&, cudaStream_t, DecodeKernel);
CBATCH_INSTANTIATE_DECODE(float)
CBATCH_INSTANTIATE_DECODE(__nv_bfloat16)
CBATCH_INSTANTIATE_DECODE(__half)
#undef CBATCH_INSTANTIATE_DECODE

}  // namespace cbatch
