// The block code of the grouped expert GEMM over quantized weights (moe_quant_gemm.cu): for every expert e,
// y[offsets[e] .. offsets[e + 1]) (m_e, n) = x[same rows] (m_e, k) T . dequant(W_e)^T, W_e (n, k) held
// in 32-element blocks along k (BlockWeights<F>: ggml's MXFP4, Q8_0, Q4_0, ..., and cbatch's Q4_Z, Q8_Z, FP8 with
// its fp32 scale and NVFP4 with a scale per 16 elements), in ggml's 256-element
// superblocks (SuperBlockWeights: Q4_K, Q5_K, Q6_K, read as pieces of 32), or as FP8 E4M3 codes with one
// fp32 scale per output row (Fp8RowWeights). The offsets are read from device memory: the grid's m extent is
// an upper bound on the tiles (moe_quant_gemm_tiles), each CTA finds its (expert, row tile) from the offsets
// and surplus CTAs return, so the caller needs no host copy of the offsets.
//
// A CTA is 4 warps and takes BM = 32 rows of one expert x BN = 64 columns of n, in k steps of BK = 64:
//  - x tiles by cp.async (zero-filled past the expert's rows and past k), two stages;
//  - the weight tile global -> registers (the next tile's loads are issued before the current tile's
//    products, to overlap them) -> dequantised to T -> shared memory, two stages;
//  - each warp owns 16 columns of the tile, all 32 rows: mma.m16n8k16, fp32 accumulators, A from the x
//    tile and B from the weight tile by ldmatrix (rows padded by 16 bytes: distinct banks).
// A dense layer's product (one expert) at decode splits k over the grid's z extent when its n tiles alone would
// leave SMs idle (o and down of an 8B: 64 tiles on 132 SMs): each split writes fp32 partial sums, which
// split_k_reduce adds in split order.
// Why these sizes: a decode step gives an expert 1-16 rows, so a weight byte is read once per m tile
// whatever BM; BM = 32 rather than 16 halves the re-reads of prefill at no cost to decode (the second
// m16 tile is skipped when the expert's tile has at most 16 rows). BK = 64 is two ggml blocks per row,
// divides gpt-oss's 2880 (128 would not), and keeps a CTA at 27 KB of shared memory, so several CTAs share
// an SM to hide the loads' latency. k must be a multiple of 32 (whole blocks; 16-byte x pieces).
// A weight is decoded by the same formula as quant_blocks.hpp's decoders (so the GEMM multiplies exactly the
// values the CPU and the decode-to-T path use), then rounded to T.
// FP8 codes become T exactly (E4M3 is a subset of bf16 and of fp16); their row scale multiplies the fp32
// accumulator in the epilogue. A block's value scale * code is rounded to T once, as the decode-to-T path
// rounds it. fp32 activations keep that decode-to-T path (no fp32 tensor-core product here).
//
// It uses no CUDA header of its own: include it after decode_kernels.cuh and cuda_dtype.cuh (cp.async,
// ldmatrix, mma, pack2, from_float), or on the host after tests/cuda/block_emulator.hpp and
// tests/cuda/warp_mma_emulator.hpp, which emulate them.
#pragma once
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "engine/model/fp8.hpp"
#include "engine/model/quant_blocks.hpp"

namespace cbatch::moe_quant_detail {

using decode_detail::cp_async16_zfill;
using decode_detail::cp_async_commit;
using decode_detail::cp_async_wait;
using decode_detail::ldmatrix_x4;
using decode_detail::mma_16816;
using decode_detail::pack2;

constexpr int kQgBm = 32, kQgBn = 64, kQgBk = 64;   // tile rows, columns, k step
constexpr int kQgWarps = 4, kQgThreads = 32 * kQgWarps;
constexpr int kQgLd = kQgBk + 8;                     // padded smem row, elements
constexpr int kQgXTileElems = kQgBm * kQgLd;
constexpr int kQgWTileElems = kQgBn * kQgLd;

// Shared memory of a CTA: two x stages then two weight stages, T elements.
template <typename T>
constexpr size_t moe_quant_gemm_smem_bytes() {
  return sizeof(T) * 2 * (kQgXTileElems + kQgWTileElems);
}

// The m extent of the grid: enough row tiles for any split of num_picks rows over num_experts experts
// (each expert's rows round up to whole tiles at most once).
inline int64_t moe_quant_gemm_tiles(int64_t num_picks, int num_experts) {
  return (num_picks + kQgBm - 1) / kQgBm + num_experts;
}

struct alignas(16) Bytes16 {
  uint32_t w[4];
};

// Weights in a 32-element ggml block format F: w (experts, n, k / 32 blocks of F::kBytes).
template <class F>
struct BlockWeights {
  static_assert(F::kElems == 32, "32-element blocks along k");
  static constexpr int kBlocksPerThread = kQgBn * (kQgBk / 32) / kQgThreads;
  static_assert(kBlocksPerThread >= 1 && kQgBn * (kQgBk / 32) % kQgThreads == 0, "whole blocks per thread");
  static constexpr int kSubBlocks = 32 / F::kSubElems;
  // A block is loaded in the widest words its size keeps aligned (every block starts at a multiple of kBytes
  // from the buffer's 16-byte aligned start): Q8_0's 34 bytes in 17 halves, FP8's 36 in 9 words, NVFP4's 24
  // in 3 double words, MXFP4's 17 byte by byte; little-endian, as the bytes lie.
  static constexpr int kWordBytes = (F::kBytes & -F::kBytes) >= 8 ? 8 : (F::kBytes & -F::kBytes);
  using Word = std::conditional_t<kWordBytes == 8, uint64_t, std::conditional_t<kWordBytes == 4, uint32_t,
               std::conditional_t<kWordBytes == 2, uint16_t, uint8_t>>>;
  static_assert(F::kSubElems % 8 == 0 && 32 % F::kSubElems == 0, "sub-blocks of whole 8-element pieces");
  const uint8_t* w = nullptr;

  struct Regs {
    uint8_t bytes[kBlocksPerThread][F::kBytes];
    bool valid[kBlocksPerThread];
  };
  // This thread's blocks of the (kQgBn, kQgBk) weight tile at (n0, k0) of expert e: block (row, b) is
  // tile row i / (BK / 32) and block i % (BK / 32) for i = tid + j * threads.
  __device__ __forceinline__ void load(Regs& r, int e, int n, int k, int n0, int k0, int tid) const {
    const size_t row_bytes = static_cast<size_t>(k / 32) * F::kBytes;
#pragma unroll
    for (int j = 0; j < kBlocksPerThread; ++j) {
      const int i = tid + j * kQgThreads, row = i / (kQgBk / 32), b = i % (kQgBk / 32);
      r.valid[j] = n0 + row < n && k0 + b * 32 < k;
      if (!r.valid[j]) continue;
      const uint8_t* src = w + (static_cast<size_t>(e) * n + n0 + row) * row_bytes + (k0 / 32 + b) * F::kBytes;
      const auto* words = reinterpret_cast<const Word*>(src);
#pragma unroll
      for (int c = 0; c < F::kBytes / kWordBytes; ++c) {
        const Word v = words[c];
#pragma unroll
        for (int h = 0; h < kWordBytes; ++h) r.bytes[j][c * kWordBytes + h] = static_cast<uint8_t>(v >> (8 * h));
      }
    }
  }
  // The blocks dequantised to T at their places in s_w (kQgBn, kQgLd); invalid ones as zeros.
  template <typename T>
  __device__ __forceinline__ void store(const Regs& r, T* s_w, int tid) const {
#pragma unroll
    for (int j = 0; j < kBlocksPerThread; ++j) {
      const int i = tid + j * kQgThreads, row = i / (kQgBk / 32), b = i % (kQgBk / 32);
      ScaleOffset so[kSubBlocks];  // each sub-block's, decoded once (NVFP4: two of 16)
#pragma unroll
      for (int s = 0; s < kSubBlocks; ++s) so[s] = r.valid[j] ? F::scale(r.bytes[j], s) : ScaleOffset{};
      Bytes16* dst = reinterpret_cast<Bytes16*>(s_w + row * kQgLd + b * 32);
#pragma unroll
      for (int p = 0; p < 4; ++p) {  // 4 pieces of 8 elements, each inside one sub-block
        Bytes16 piece;
        const ScaleOffset& sp = so[p * 8 / F::kSubElems];
#pragma unroll
        for (int h = 0; h < 4; ++h) {
          const int e0 = p * 8 + 2 * h;
          const float lo = r.valid[j] ? weight_value<F::kFormula>(sp, F::value(F::code(r.bytes[j], e0))) : 0.0f;
          const float hi = r.valid[j] ? weight_value<F::kFormula>(sp, F::value(F::code(r.bytes[j], e0 + 1))) : 0.0f;
          piece.w[h] = pack2<T>(lo, hi);
        }
        dst[p] = piece;
      }
    }
  }
  __device__ __forceinline__ float column_scale(int, int, int) const { return 1.0f; }
};

// The 16 bytes of 4 words, read by index (kquant_scale_min's accessor) with a select and a shift: a word
// array indexed by a value the compiler cannot fold (or a select chain it turns into one) goes to local
// memory.
struct HeadBytes {
  uint32_t w[4];
  __device__ __forceinline__ int operator[](int i) const {
    const uint64_t half = i < 8 ? (uint64_t{w[1]} << 32 | w[0]) : (uint64_t{w[3]} << 32 | w[2]);
    return static_cast<int>((half >> (8 * (i % 8))) & 0xFF);
  }
};

// Byte l (a constant after unrolling) of words w.
template <int N>
__device__ __forceinline__ int byte_at(const uint32_t (&w)[N], int l) {
  return static_cast<int>((w[l / 4] >> (8 * (l % 4))) & 0xFF);
}

// A 32-element piece of a Q4_K or Q5_K superblock (sub-block j = piece): the 16-byte head (d, dmin, the 12
// bytes of 6-bit scales and mins), Q5_K's 32 fifth-bit bytes and the 32 nibble bytes of the sub-block pair
// j / 2. Blocks of 144 and 176 bytes keep 16-byte alignment, so all of it comes in 16-byte loads.
template <bool kFifthBit>
struct KQuant45Piece {
  using F = KQuant45Format<kFifthBit>;
  static constexpr int kHighWords = kFifthBit ? 8 : 0;
  struct ScaleBytes {  // the head's bytes from 4 on
    HeadBytes head;
    __device__ __forceinline__ int operator[](int i) const { return head[i + 4]; }
  };
  struct Raw {
    HeadBytes head;
    uint32_t qh[kHighWords == 0 ? 1 : kHighWords];
    uint32_t qs[8];
  };
  __device__ __forceinline__ static void load(Raw& r, const uint8_t* block, int j) {
    const auto* head = reinterpret_cast<const Bytes16*>(block);
    const auto* qs = reinterpret_cast<const Bytes16*>(block + (kFifthBit ? 48 : 16) + (j / 2) * 32);
    words(r.head.w, head[0]);
    words(r.qs, qs[0]);
    words(r.qs + 4, qs[1]);
    if constexpr (kFifthBit) {
      words(r.qh, head[1]);
      words(r.qh + 4, head[2]);
    }
  }
  __device__ __forceinline__ static void words(uint32_t* out, const Bytes16& v) {
#pragma unroll
    for (int i = 0; i < 4; ++i) out[i] = v.w[i];
  }
  // Element l of the piece as F decodes it (the same formula, the same roundings).
  template <class Out>
  __device__ __forceinline__ static void decode(const Raw& r, int j, Out&& out) {
    int sc = 0, m = 0;
    kquant_scale_min(ScaleBytes{r.head}, j, sc, m);
    const ScaleOffset so{half_to_float(static_cast<uint16_t>(r.head.w[0])) * static_cast<float>(sc),
                         -product_rounded(half_to_float(static_cast<uint16_t>(r.head.w[0] >> 16)),
                                          static_cast<float>(m))};
#pragma unroll
    for (int l = 0; l < 32; ++l) {
      int code = (byte_at(r.qs, l) >> (4 * (j % 2))) & 0x0F;
      if constexpr (kFifthBit) code |= ((byte_at(r.qh, l) >> j) & 1) << 4;
      out(l, weight_value<F::kFormula>(so, code));
    }
  }
};

// A 32-element piece p of a Q6_K superblock (sub-blocks 2p and 2p + 1 of 16): the 32 low-nibble bytes of
// half p / 4 at (p % 2) * 32, the 32 high-crumb bytes of that half, the two int8 scales and d. A 210-byte
// block is only 2-byte aligned: 16-bit loads.
struct Q6KPiece {
  struct Raw {
    uint32_t ql[8], qh[8];
    uint32_t tail;  // scales 2p, 2p + 1 (low half), d (high half)
  };
  __device__ __forceinline__ static uint32_t load2(const uint8_t* p, int i) {
    const auto* h = reinterpret_cast<const uint16_t*>(p);
    return static_cast<uint32_t>(h[2 * i]) | static_cast<uint32_t>(h[2 * i + 1]) << 16;
  }
  __device__ __forceinline__ static void load(Raw& r, const uint8_t* block, int p) {
    const int h = p / 4;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      r.ql[i] = load2(block + h * 64 + (p % 2) * 32, i);
      r.qh[i] = load2(block + 128 + h * 32, i);
    }
    r.tail = static_cast<uint32_t>(*reinterpret_cast<const uint16_t*>(block + 192 + 2 * p)) |
             static_cast<uint32_t>(*reinterpret_cast<const uint16_t*>(block + 208)) << 16;
  }
  template <class Out>
  __device__ __forceinline__ static void decode(const Raw& r, int p, Out&& out) {
    const float d = half_to_float(static_cast<uint16_t>(r.tail >> 16));
    const ScaleOffset so[2] = {{d * static_cast<float>(static_cast<int8_t>(r.tail & 0xFF)), 0.0f},
                               {d * static_cast<float>(static_cast<int8_t>((r.tail >> 8) & 0xFF)), 0.0f}};
#pragma unroll
    for (int l = 0; l < 32; ++l) {
      const int low = (byte_at(r.ql, l) >> (4 * ((p % 4) / 2))) & 0x0F;
      const int high = (byte_at(r.qh, l) >> (2 * (p % 4))) & 3;
      out(l, weight_value<Formula::kScaled>(so[l / 16], (low | high << 4) - 32));
    }
  }
};

// Weights in a 256-element superblock format, read a piece at a time: w (experts, n, k / 256 blocks of
// F::kBytes), k a multiple of 256, so a k tile (64) lies in one superblock and is two pieces of 32.
// Thread tid takes piece tid % 2 of tile row tid / 2.
template <class F, class Piece>
struct SuperBlockWeights {
  static_assert(F::kElems == 256 && 256 % kQgBk == 0, "a k tile inside one superblock");
  static_assert(kQgBn * (kQgBk / 32) == kQgThreads, "one piece per thread");
  const uint8_t* w = nullptr;

  struct Regs {
    typename Piece::Raw raw;
    int piece;
    bool valid;
  };
  __device__ __forceinline__ void load(Regs& r, int e, int n, int k, int n0, int k0, int tid) const {
    const int row = tid / 2;
    r.piece = (k0 % 256) / 32 + tid % 2;
    r.valid = n0 + row < n && k0 < k;
    if (!r.valid) {
      r.raw = {};  // unread (store writes zeros); set so that no compiler sees it used uninitialised
      return;
    }
    const size_t blocks_per_row = static_cast<size_t>(k / 256);
    Piece::load(r.raw, w + ((static_cast<size_t>(e) * n + n0 + row) * blocks_per_row + k0 / 256) * F::kBytes,
                r.piece);
  }
  template <typename T>
  __device__ __forceinline__ void store(const Regs& r, T* s_w, int tid) const {
    float v[32];
    if (r.valid) {
      Piece::decode(r.raw, r.piece, [&](int l, float x) { v[l] = x; });
    } else {
#pragma unroll
      for (int l = 0; l < 32; ++l) v[l] = 0.0f;
    }
    Bytes16* dst = reinterpret_cast<Bytes16*>(s_w + (tid / 2) * kQgLd + (tid % 2) * 32);
#pragma unroll
    for (int p = 0; p < 4; ++p) {
      Bytes16 piece;
#pragma unroll
      for (int h = 0; h < 4; ++h) piece.w[h] = pack2<T>(v[p * 8 + 2 * h], v[p * 8 + 2 * h + 1]);
      dst[p] = piece;
    }
  }
  __device__ __forceinline__ float column_scale(int, int, int) const { return 1.0f; }
};
template <bool kFifthBit>
using KQuant45Weights = SuperBlockWeights<KQuant45Format<kFifthBit>, KQuant45Piece<kFifthBit>>;
using Q6KWeights = SuperBlockWeights<BlockFormat<DType::kQ6_K>, Q6KPiece>;

// FP8 E4M3 weights with a scale per output row: codes (experts, n, k), scales (experts, n).
struct Fp8RowWeights {
  static constexpr int kPiecesPerThread = kQgBn * kQgBk / 16 / kQgThreads;  // 16 codes a piece
  static_assert(kPiecesPerThread >= 1 && kQgBn * kQgBk / 16 % kQgThreads == 0, "whole pieces per thread");
  const uint8_t* codes = nullptr;
  const float* scales = nullptr;

  struct Regs {
    Bytes16 piece[kPiecesPerThread];
  };
  // Piece i = tid + j * threads of the tile: row i / (BK / 16), codes (i % (BK / 16)) * 16 ...; zero past
  // n or k (k is a multiple of 32, so a piece is whole or absent).
  __device__ __forceinline__ void load(Regs& r, int e, int n, int k, int n0, int k0, int tid) const {
#pragma unroll
    for (int j = 0; j < kPiecesPerThread; ++j) {
      const int i = tid + j * kQgThreads, row = i / (kQgBk / 16), c = (i % (kQgBk / 16)) * 16;
      if (n0 + row < n && k0 + c < k) {
        r.piece[j] = *reinterpret_cast<const Bytes16*>(codes + (static_cast<size_t>(e) * n + n0 + row) * k + k0 + c);
      } else {
        r.piece[j] = Bytes16{{0u, 0u, 0u, 0u}};  // code 0 is +0
      }
    }
  }
  template <typename T>
  __device__ __forceinline__ void store(const Regs& r, T* s_w, int tid) const {
#pragma unroll
    for (int j = 0; j < kPiecesPerThread; ++j) {
      const int i = tid + j * kQgThreads, row = i / (kQgBk / 16), c = (i % (kQgBk / 16)) * 16;
      Bytes16* dst = reinterpret_cast<Bytes16*>(s_w + row * kQgLd + c);
#pragma unroll
      for (int p = 0; p < 2; ++p) {
        Bytes16 out;
#pragma unroll
        for (int h = 0; h < 4; ++h) {
          const uint32_t word = r.piece[j].w[2 * p + h / 2] >> (16 * (h % 2));  // codes 8p + 2h, + 1
          out.w[h] = pack2<T>(fp8_e4m3_to_float(static_cast<uint8_t>(word)),
                              fp8_e4m3_to_float(static_cast<uint8_t>(word >> 8)));
        }
        dst[p] = out;
      }
    }
  }
  __device__ __forceinline__ float column_scale(int e, int n, int col) const {
    return scales[static_cast<size_t>(e) * n + col];
  }
};

template <typename T, class W>
struct QuantGemmArgs {
  T* y;                   // (num_picks, n)
  const T* x;             // (num_picks, k) the rows permuted by expert
  W w;                    // the experts' weights, (num_experts, n, k) in W's format
  const int32_t* offsets;  // (num_experts + 1) device: each expert's first row, then num_picks
  int num_experts, n, k;
  // Split k (a dense layer's few rows, whose n alone gives too few CTAs): CTA z of the grid's z extent sums k tiles
  // [z split_k_tiles, (z + 1) split_k_tiles) into partial (gridDim.z, num_picks, n) fp32 instead of y, and
  // split_k_reduce sums them in z order. 0: every k tile, into y.
  int split_k_tiles = 0;
  float* partial = nullptr;
};

// The row tile a CTA takes: `tile` counts the experts' row tiles in expert order; expert -1: none left.
struct ExpertTile {
  int expert, row0, rows;
};

// Every warp scans the offsets 32 experts at a time (tile counts, an inclusive warp scan, a ballot for the
// first expert whose tiles reach past `tile`), so the result is uniform over the CTA.
__device__ __forceinline__ ExpertTile expert_tile(const int32_t* offsets, int num_experts, int tile, int lane) {
  int base = 0;  // tiles of the experts before this chunk
  for (int e0 = 0; e0 < num_experts; e0 += 32) {
    const int e = e0 + lane;
    const int begin = e < num_experts ? offsets[e] : 0;
    const int m = e < num_experts ? offsets[e + 1] - begin : 0;
    const int tiles = (m + kQgBm - 1) / kQgBm;
    int inclusive = tiles;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
      const int v = __shfl_up_sync(0xffffffffu, inclusive, d);
      if (lane >= d) inclusive += v;
    }
    const unsigned past = __ballot_sync(0xffffffffu, base + inclusive > tile);
    if (past != 0) {
      const int src = __ffs(past) - 1;
      const int first = __shfl_sync(0xffffffffu, base + inclusive - tiles, src);
      const int src_begin = __shfl_sync(0xffffffffu, begin, src), src_m = __shfl_sync(0xffffffffu, m, src);
      const int row = (tile - first) * kQgBm;
      return ExpertTile{e0 + src, src_begin + row, min(kQgBm, src_m - row)};
    }
    base += __shfl_sync(0xffffffffu, inclusive, 31);
  }
  return ExpertTile{-1, 0, 0};
}

// cp.async of the x tile (kQgBm, kQgBk) at (row0, k0): rows past `rows` and k past k are zero-filled.
template <typename T>
__device__ __forceinline__ void load_x_tile(const T* x, int row0, int rows, int k, int k0, T* s_x, int tid) {
  constexpr int kVec = 16 / static_cast<int>(sizeof(T));
  constexpr int kPieces = kQgBm * kQgBk / kVec;
  static_assert(kPieces % kQgThreads == 0, "whole pieces per thread");
#pragma unroll
  for (int j = 0; j < kPieces / kQgThreads; ++j) {
    const int i = tid + j * kQgThreads, r = i / (kQgBk / kVec), c = (i % (kQgBk / kVec)) * kVec;
    const bool valid = r < rows && k0 + c < k;
    const T* src = valid ? x + static_cast<size_t>(row0 + r) * k + k0 + c : x;
    cp_async16_zfill(s_x + r * kQgLd + c, src, valid ? 16 : 0);
  }
}

// The body of moe_quant_gemm_kernel: grid (moe_quant_gemm_tiles, ceil(n / kQgBn)), kQgThreads threads,
// smem moe_quant_gemm_smem_bytes<T>() of dynamic shared memory (16-byte aligned).
template <typename T, class W>
__device__ __forceinline__ void moe_quant_gemm_block(const QuantGemmArgs<T, W>& a, unsigned char* smem) {
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const ExpertTile et = expert_tile(a.offsets, a.num_experts, static_cast<int>(blockIdx.x), lane);
  if (et.expert < 0) return;  // a surplus CTA (uniform over the CTA)
  const int e = et.expert, n0 = static_cast<int>(blockIdx.y) * kQgBn;
  const int m_tiles = et.rows > 16 ? 2 : 1;
  T* s_x = reinterpret_cast<T*>(smem);              // (2 stages, kQgBm, kQgLd)
  T* s_w = s_x + 2 * kQgXTileElems;                 // (2 stages, kQgBn, kQgLd)
  const int all_k_tiles = (a.k + kQgBk - 1) / kQgBk;
  const int kt0 = a.split_k_tiles > 0 ? static_cast<int>(blockIdx.z) * a.split_k_tiles : 0;
  const int num_k_tiles = a.split_k_tiles > 0 ? min(all_k_tiles, kt0 + a.split_k_tiles) : all_k_tiles;

  float acc[2][2][4];  // (m16 tile, n8 tile of the warp's 16 columns, fragment)
#pragma unroll
  for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) acc[mt][nt][0] = acc[mt][nt][1] = acc[mt][nt][2] = acc[mt][nt][3] = 0.0f;
  }
  typename W::Regs regs;
  load_x_tile(a.x, et.row0, et.rows, a.k, kt0 * kQgBk, s_x, tid);
  cp_async_commit();
  a.w.load(regs, e, a.n, a.k, n0, kt0 * kQgBk, tid);

  for (int kt = kt0; kt < num_k_tiles; ++kt) {
    const int stage = (kt - kt0) % 2;
    T* s_w_stage = s_w + stage * kQgWTileElems;
    a.w.template store<T>(regs, s_w_stage, tid);  // the stage's last readers passed two barriers ago
    if (kt + 1 < num_k_tiles) {
      load_x_tile(a.x, et.row0, et.rows, a.k, (kt + 1) * kQgBk, s_x + (1 - stage) * kQgXTileElems, tid);
      a.w.load(regs, e, a.n, a.k, n0, (kt + 1) * kQgBk, tid);  // in flight during the products
    }
    cp_async_commit();
    cp_async_wait<1>();  // this tile's x
    __syncthreads();
    const T* x_tile = s_x + stage * kQgXTileElems;
    const T* w_warp = s_w_stage + warp * 16 * kQgLd;
#pragma unroll
    for (int kk = 0; kk < kQgBk / 16; kk += 2) {
      uint32_t b[2][4];  // per n8 tile: B of k steps kk (b[0], b[1]) and kk + 1 (b[2], b[3])
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) ldmatrix_x4(b[nt], w_warp + (nt * 8 + lane % 8) * kQgLd + kk * 16 + (lane / 8) * 8);
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
        if (mt >= m_tiles) continue;  // uniform: the second m16 tile only past 16 rows
#pragma unroll
        for (int s = 0; s < 2; ++s) {
          uint32_t x_frag[4];
          ldmatrix_x4(x_frag, x_tile + (mt * 16 + ((lane / 8) % 2) * 8 + lane % 8) * kQgLd + (kk + s) * 16 +
                                  (lane / 16) * 8);
#pragma unroll
          for (int nt = 0; nt < 2; ++nt) {
            mma_16816<T>(acc[mt][nt], x_frag[0], x_frag[1], x_frag[2], x_frag[3], b[nt][2 * s], b[nt][2 * s + 1]);
          }
        }
      }
    }
    __syncthreads();  // the stages read here are written again from the next iteration on
  }
  cp_async_wait<0>();  // only an empty group is left

  // Epilogue: lane (g, t) holds rows g, g + 8 of each m16 tile, columns 2 t, 2 t + 1 of each n8 tile.
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int r = mt * 16 + g + (i / 2) * 8, col = n0 + warp * 16 + nt * 8 + 2 * t + i % 2;
        if (r < et.rows && col < a.n) {
          const float v = acc[mt][nt][i] * a.w.column_scale(e, a.n, col);
          const size_t at = static_cast<size_t>(et.row0 + r) * a.n + col;
          if (a.partial == nullptr) {
            a.y[at] = from_float<T>(v);
          } else {  // this split's slice of (splits, num_picks, n)
            a.partial[static_cast<size_t>(blockIdx.z) * a.offsets[a.num_experts] * a.n + at] = v;
          }
        }
      }
    }
  }
}

// Element i of y (elems = num_picks * n) from the splits' partial sums (splits, elems), added in split order
// (deterministic whatever the schedule) and rounded to T once.
template <typename T>
__device__ __forceinline__ void split_k_reduce(T* y, const float* partial, int splits, size_t elems, size_t i) {
  float sum = 0.0f;
  for (int z = 0; z < splits; ++z) sum += partial[static_cast<size_t>(z) * elems + i];
  y[i] = from_float<T>(sum);
}

}  // namespace cbatch::moe_quant_detail
