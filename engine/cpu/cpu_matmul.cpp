#include "engine/cpu/cpu_matmul.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

#include "engine/core/error.hpp"
#include "engine/cpu/thread_pool.hpp"

#if defined(__SSE2__)
#include <immintrin.h>
#endif

namespace cbatch {
namespace {

// Vec: one panel row of lanes. Three builds of the same arithmetic (a lane-wise fused multiply-add):
// AVX-512 (16 lanes), AVX2+FMA (8), portable fmaf (8). One binary uses one of them for every call.
// A register tile is kMR rows by kNV panels; a one-row product (a decode step of one sequence, bound by
// streaming the weights) takes kRowNV panels at a time instead.
#if defined(__AVX512F__)
constexpr int kLanes = 16;
constexpr int kMR = 8;     // rows per register tile
constexpr int kNV = 3;     // panels per register tile: 24 accumulators of 32 registers
constexpr int kRowNV = 3;
struct Vec {
  __m512 v;
  static Vec zero() { return {_mm512_setzero_ps()}; }
  static Vec load(const float* p) { return {_mm512_loadu_ps(p)}; }
  static Vec load_to_register(const float* p) { return load(p); }  // see the AVX2 one (not measured here)
  static Vec broadcast(float x) { return {_mm512_set1_ps(x)}; }
  static Vec from_int8(__m128i q) { return {_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q))}; }   // 16 lanes
  static Vec from_uint8(__m128i q) { return {_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(q))}; }
  static Vec mul(Vec a, Vec b) { return {_mm512_mul_ps(a.v, b.v)}; }
  void fma(Vec a, Vec b) { v = _mm512_fmadd_ps(a.v, b.v, v); }
  void store(float* p) const { _mm512_storeu_ps(p, v); }
};
#elif defined(__AVX2__) && defined(__FMA__)
constexpr int kLanes = 8;
// 12 accumulators of 16 registers. 6 x 2 rather than 4 x 3: with 2 weight vectors and a broadcast beside
// the accumulators, the compiler keeps the weights in registers instead of re-loading them for every
// multiply-add; one core then runs a 128-row product at ~90% of its FMA peak instead of ~50%.
constexpr int kMR = 6;
constexpr int kNV = 2;
constexpr int kRowNV = 4;
struct Vec {
  __m256 v;
  static Vec zero() { return {_mm256_setzero_ps()}; }
  static Vec load(const float* p) { return {_mm256_loadu_ps(p)}; }
  // A load the compiler cannot fold into the multiply-adds that use it: GCC 12 folds the weight loads
  // of tiles of 4 rows or fewer, re-loading each weight vector once per row.
  static Vec load_to_register(const float* p) {
    __m256 r = _mm256_loadu_ps(p);
    __asm__("" : "+x"(r));
    return {r};
  }
  static Vec broadcast(float x) { return {_mm256_set1_ps(x)}; }
  static Vec from_int8(__m128i q) { return {_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q))}; }  // low 8 bytes
  static Vec from_uint8(__m128i q) { return {_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(q))}; }
  static Vec mul(Vec a, Vec b) { return {_mm256_mul_ps(a.v, b.v)}; }
  void fma(Vec a, Vec b) { v = _mm256_fmadd_ps(a.v, b.v, v); }
  void store(float* p) const { _mm256_storeu_ps(p, v); }
};
#else
constexpr int kLanes = 8;
constexpr int kMR = 4;
constexpr int kNV = 2;
constexpr int kRowNV = 2;
struct Vec {
  float v[8];
  static Vec zero() { return {}; }
  static Vec load(const float* p) {
    Vec r;
    for (int i = 0; i < 8; ++i) r.v[i] = p[i];
    return r;
  }
  static Vec load_to_register(const float* p) { return load(p); }
  static Vec broadcast(float x) {
    Vec r;
    for (float& e : r.v) e = x;
    return r;
  }
  void fma(Vec a, Vec b) {
    for (int i = 0; i < 8; ++i) v[i] = std::fma(a.v[i], b.v[i], v[i]);
  }
  void store(float* p) const { std::memcpy(p, v, sizeof(v)); }
};
#endif

constexpr int64_t kRowBlock = 128;  // rows of X kept in cache while the panels stream past

// Stores an MR x NV-panel tile of accumulators; columns past `cols` (the end of N) were computed on
// the zero padding and are not stored.
template <int MR, int NV>
void store_tile(const Vec (&acc)[MR][NV], float* y, int64_t ldy, int64_t cols) {
  for (int r = 0; r < MR; ++r) {
    for (int v = 0; v < NV; ++v) {
      const int64_t valid = std::min<int64_t>(kLanes, cols - v * kLanes);
      if (valid == kLanes) {
        acc[r][v].store(y + r * ldy + v * kLanes);
      } else if (valid > 0) {
        float lanes[kLanes];
        acc[r][v].store(lanes);
        std::memcpy(y + r * ldy + v * kLanes, lanes, static_cast<size_t>(valid) * sizeof(float));
      }
    }
  }
}

// An MR x NV-panel tile of Y. panels: the first panel of the tile, panel stride k * kLanes.
template <int MR, int NV>
void tile(const float* x, int64_t ldx, const float* panels, int64_t k, float* y, int64_t ldy, int64_t cols) {
  Vec acc[MR][NV];
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < NV; ++v) acc[r][v] = Vec::zero();
  for (int64_t p = 0; p < k; ++p) {
    Vec w[NV];
    for (int v = 0; v < NV; ++v) w[v] = Vec::load_to_register(panels + v * k * kLanes + p * kLanes);
    for (int r = 0; r < MR; ++r) {
      const Vec xb = Vec::broadcast(x[r * ldx + p]);
      for (int v = 0; v < NV; ++v) acc[r][v].fma(xb, w[v]);
    }
  }
  store_tile(acc, y, ldy, cols);
}

using TileFn = void (*)(const float*, int64_t, const float*, int64_t, float*, int64_t, int64_t);

template <int MR, int... NVs>
constexpr std::array<TileFn, sizeof...(NVs)> tile_row(std::integer_sequence<int, NVs...>) {
  return {&tile<MR, NVs + 1>...};
}

template <int... MRs>
constexpr std::array<std::array<TileFn, kNV>, kMR> tile_table(std::integer_sequence<int, MRs...>) {
  return {tile_row<MRs + 1>(std::make_integer_sequence<int, kNV>{})...};
}

// kTiles[mr - 1][nv - 1] computes an mr-row, nv-panel tile (edges use the smaller ones); kRowTiles[nv - 1]
// a one-row tile of up to kRowNV panels.
constexpr auto kTiles = tile_table(std::make_integer_sequence<int, kMR>{});
constexpr auto kRowTiles = tile_row<1>(std::make_integer_sequence<int, kRowNV>{});

int64_t num_panels(int64_t n) { return (n + kLanes - 1) / kLanes; }

// Blocked panels. A panel is K / 32 groups, one per block column; a group holds the lanes' scales
// (float d[kLanes]), their minimums (float m[kLanes], zero but for Q4_1), then the codes of its 32 k in k
// order: Q8_0 one int8 per lane, Q4 kLanes / 2 bytes whose low nibble is lane j and high nibble lane
// j + kLanes / 2. Lanes past N decode to +0, as the fp32 panels' padding.
constexpr int kBlock = 32;
constexpr int kHalf = kLanes / 2;

constexpr int code_bytes_per_k(DType dtype) { return dtype == DType::kQ8_0 ? kLanes : kHalf; }
constexpr size_t group_bytes(DType dtype) { return 2 * kLanes * sizeof(float) + kBlock * code_bytes_per_k(dtype); }

// Blocks that decode to +0 weights, for the lanes past N (Q4_0 needs code 8: code 0 gives (0 - 8) * 0 = -0).
constexpr uint8_t kZeroBlock[34] = {};
constexpr uint8_t kQ4_0ZeroBlock[18] = {0, 0, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88,
                                        0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88};

float load_f16(const uint8_t* p) {
  uint16_t half;
  std::memcpy(&half, p, 2);
  return f16_to_f32(half);
}

#if defined(__SSE2__)
template <int W>  // interleave the W-byte elements of a and b: the low halves, then the high halves
__m128i interleave_low(__m128i a, __m128i b) {
  if constexpr (W == 1) return _mm_unpacklo_epi8(a, b);
  if constexpr (W == 2) return _mm_unpacklo_epi16(a, b);
  if constexpr (W == 4) return _mm_unpacklo_epi32(a, b);
  if constexpr (W == 8) return _mm_unpacklo_epi64(a, b);
}
template <int W>
__m128i interleave_high(__m128i a, __m128i b) {
  if constexpr (W == 1) return _mm_unpackhi_epi8(a, b);
  if constexpr (W == 2) return _mm_unpackhi_epi16(a, b);
  if constexpr (W == 4) return _mm_unpackhi_epi32(a, b);
  if constexpr (W == 8) return _mm_unpackhi_epi64(a, b);
}

// N rows of 16 bytes (N = 2, 4, 8 or 16; row r, byte b) written column by column: out[b * N + r]. Each
// round interleaves neighbouring rows at twice the width of the round before; the low halves hold the
// lower columns, so writing the low half before the high half keeps the columns in order. Returns the
// end of what was written (16 N bytes).
template <int N, int W = 1>
uint8_t* store_columns(const __m128i (&rows)[N], uint8_t* out) {
  if constexpr (N == 1) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out), rows[0]);
    return out + 16;
  } else {
    __m128i low[N / 2], high[N / 2];
    for (int i = 0; i < N / 2; ++i) {
      low[i] = interleave_low<W>(rows[2 * i], rows[2 * i + 1]);
      high[i] = interleave_high<W>(rows[2 * i], rows[2 * i + 1]);
    }
    return store_columns<N / 2, 2 * W>(high, store_columns<N / 2, 2 * W>(low, out));
  }
}

__m128i load16(const uint8_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }
#endif

// One block column of a panel: every lane's block (ggml layout) into one group. ggml stores a Q4 block's
// element i in the low nibble of byte i and element i + 16 in the high nibble; a group's code byte j of
// k i pairs lane j (low nibble) with lane j + kHalf (high).
void put_group(DType dtype, const uint8_t* const (&blocks)[kLanes], uint8_t* group) {
  float* scales = reinterpret_cast<float*>(group);
  uint8_t* codes = group + 2 * kLanes * sizeof(float);
  for (int l = 0; l < kLanes; ++l) {
    scales[l] = load_f16(blocks[l]);
    scales[kLanes + l] = dtype == DType::kQ4_1 ? load_f16(blocks[l] + 2) : 0.0f;
  }
  const int code_offset = dtype == DType::kQ4_1 ? 4 : 2;  // after d (and m)
#if defined(__SSE2__)
  if (dtype == DType::kQ8_0) {  // a kLanes x 32 transpose, in two halves of 16 k
    __m128i rows[kLanes];
    for (int half = 0; half < 2; ++half) {
      for (int l = 0; l < kLanes; ++l) rows[l] = load16(blocks[l] + code_offset + 16 * half);
      store_columns(rows, codes + 16 * half * kLanes);
    }
    return;
  }
  // Pair the lanes first (row j: byte i is the code byte of k i, or of k i + 16), then transpose.
  const __m128i low4 = _mm_set1_epi8(0x0F), high4 = _mm_set1_epi8(static_cast<char>(0xF0));
  __m128i first[kHalf], second[kHalf];  // k 0..15, k 16..31
  for (int j = 0; j < kHalf; ++j) {
    const __m128i a = load16(blocks[j] + code_offset), b = load16(blocks[j + kHalf] + code_offset);
    first[j] = _mm_or_si128(_mm_and_si128(a, low4), _mm_and_si128(_mm_slli_epi16(b, 4), high4));
    second[j] = _mm_or_si128(_mm_and_si128(_mm_srli_epi16(a, 4), low4), _mm_and_si128(b, high4));
  }
  store_columns(second, store_columns(first, codes));
#else
  if (dtype == DType::kQ8_0) {
    for (int l = 0; l < kLanes; ++l)
      for (int i = 0; i < kBlock; ++i) codes[i * kLanes + l] = blocks[l][code_offset + i];
    return;
  }
  for (int i = 0; i < kBlock / 2; ++i) {
    for (int j = 0; j < kHalf; ++j) {
      const uint8_t a = blocks[j][code_offset + i], b = blocks[j + kHalf][code_offset + i];
      codes[i * kHalf + j] = static_cast<uint8_t>((a & 0x0F) | (b & 0x0F) << 4);
      codes[(i + kBlock / 2) * kHalf + j] = static_cast<uint8_t>(a >> 4 | (b & 0xF0));
    }
  }
#endif
}

// GCC 12 warns about the deliberately undefined pass-through operand inside the AVX-512 conversion
// intrinsics when they are inlined (a known false positive).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

// The vector decode of a group needs the fused multiply-add that q4_1_value computes (__FP_FAST_FMAF);
// without it, or on the portable build, each lane goes through the scalar formulas.
#if defined(__FP_FAST_FMAF) && (defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__)))
#define CBATCH_VECTOR_DECODE 1
#endif

// One group of one panel, decoded a k at a time into the lanes' fp32 weights through the element
// formulas of tensor.hpp (the AVX-512 and AVX2 builds do all lanes at once, with the fused fma that
// q4_1_value computes), so both matmul paths see exactly the values tensor_rows_to_f32 gives.
template <DType D>
class BlockedGroup {
 public:
  BlockedGroup() = default;
  explicit BlockedGroup(const uint8_t* group)
      : d_(reinterpret_cast<const float*>(group)), codes_(group + 2 * kLanes * sizeof(float)) {
#ifdef CBATCH_VECTOR_DECODE
    vd_ = Vec::load(d_);
    vm_ = Vec::load(d_ + kLanes);
#endif
  }

  Vec weights(int i) const {  // i: the k within the block
#ifdef CBATCH_VECTOR_DECODE
    if constexpr (D == DType::kQ8_0) return Vec::mul(vd_, Vec::from_int8(q8_codes(i)));
    if constexpr (D == DType::kQ4_0) return Vec::mul(Vec::from_int8(_mm_sub_epi8(q4_codes(i), _mm_set1_epi8(8))), vd_);
    Vec w = vm_;  // Q4_1: q * d + m, fused
    w.fma(Vec::from_uint8(q4_codes(i)), vd_);
    return w;
#else
    float w[kLanes];
    for (int l = 0; l < kLanes; ++l) {
      if constexpr (D == DType::kQ8_0) {
        w[l] = q8_0_value(static_cast<int8_t>(codes_[i * kLanes + l]), d_[l]);
      } else {
        const uint8_t b = codes_[i * kHalf + l % kHalf];
        const int q = l < kHalf ? b & 0x0F : b >> 4;
        w[l] = D == DType::kQ4_0 ? q4_0_value(q, d_[l]) : q4_1_value(q, d_[l], d_[kLanes + l]);
      }
    }
    return Vec::load(w);
#endif
  }

 private:
#ifdef CBATCH_VECTOR_DECODE
  // The kLanes int8 codes of k i (Q8_0), and the kLanes 4-bit codes of k i, one byte per lane (Q4: the
  // low nibbles are lanes 0..kHalf-1, the high ones the rest).
  __m128i q8_codes(int i) const {
    const auto* p = reinterpret_cast<const __m128i*>(codes_ + i * kLanes);
    return kLanes == 16 ? _mm_loadu_si128(p) : _mm_loadl_epi64(p);
  }
  __m128i q4_codes(int i) const {
    const __m128i low4 = _mm_set1_epi8(0x0F);
    __m128i b;
    if constexpr (kLanes == 16) {
      b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(codes_ + i * kHalf));
    } else {
      int32_t bytes;
      std::memcpy(&bytes, codes_ + i * kHalf, sizeof(bytes));
      b = _mm_cvtsi32_si128(bytes);
    }
    const __m128i low = _mm_and_si128(b, low4), high = _mm_and_si128(_mm_srli_epi16(b, 4), low4);
    return kLanes == 16 ? _mm_unpacklo_epi64(low, high) : _mm_unpacklo_epi32(low, high);
  }
#endif

  const float* d_ = nullptr;  // d[kLanes], then m[kLanes]
  const uint8_t* codes_ = nullptr;
#ifdef CBATCH_VECTOR_DECODE
  Vec vd_, vm_;
#endif
};

template <DType D>
void unpack_panel(const uint8_t* panel, int64_t k, float* out) {
  for (int64_t b = 0; b < k / kBlock; ++b) {
    const BlockedGroup<D> group(panel + b * group_bytes(D));
    for (int i = 0; i < kBlock; ++i) group.weights(i).store(out + (b * kBlock + i) * kLanes);
  }
}

// The tile of `tile` straight from blocked panels (panel stride panel_bytes), decoding each weight as it
// is used: for a few rows this beats unpacking into a buffer and reading it back. Same values, same
// order of multiply-adds, so the same bits.
template <DType D, int MR, int NV>
void tile_blocked(const float* x, int64_t ldx, const uint8_t* panels, size_t panel_bytes, int64_t k, float* y,
                  int64_t ldy, int64_t cols) {
  Vec acc[MR][NV];
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < NV; ++v) acc[r][v] = Vec::zero();
  for (int64_t b = 0; b < k / kBlock; ++b) {
    BlockedGroup<D> groups[NV];
    for (int v = 0; v < NV; ++v) groups[v] = BlockedGroup<D>(panels + v * panel_bytes + b * group_bytes(D));
    for (int i = 0; i < kBlock; ++i) {
      Vec w[NV];
      for (int v = 0; v < NV; ++v) w[v] = groups[v].weights(i);
      const int64_t p = b * kBlock + i;
      for (int r = 0; r < MR; ++r) {
        const Vec xb = Vec::broadcast(x[r * ldx + p]);
        for (int v = 0; v < NV; ++v) acc[r][v].fma(xb, w[v]);
      }
    }
  }
  store_tile(acc, y, ldy, cols);
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

using BlockedTileFn = void (*)(const float*, int64_t, const uint8_t*, size_t, int64_t, float*, int64_t, int64_t);

template <DType D, int... NVs>
constexpr std::array<BlockedTileFn, kRowNV> blocked_tile_row(std::integer_sequence<int, NVs...>) {
  return {&tile_blocked<D, 1, NVs + 1>...};
}

// kBlockedTiles[dtype][nv - 1]: a one-row tile straight from blocked panels (Q8_0, Q4_0, Q4_1).
constexpr std::array<std::array<BlockedTileFn, kRowNV>, 3> kBlockedTiles = {
    blocked_tile_row<DType::kQ8_0>(std::make_integer_sequence<int, kRowNV>{}),
    blocked_tile_row<DType::kQ4_0>(std::make_integer_sequence<int, kRowNV>{}),
    blocked_tile_row<DType::kQ4_1>(std::make_integer_sequence<int, kRowNV>{})};

int blocked_index(DType dtype) { return dtype == DType::kQ8_0 ? 0 : dtype == DType::kQ4_0 ? 1 : 2; }

// Panels [panel_begin, panel_end) of Y for all M rows. One row (a decode step of one sequence) runs the
// one-row tiles, kRowNV panels at a time, blocked weights decoded in registers as they are used. More
// rows unpack kNV blocked panels at a time into a per-thread buffer (once per kRowBlock rows, which the
// products then amortize) and run the fp32 tiles on it.
void matmul_panels(const float* x, const PackedMatrix& w, float* y, int64_t m, int64_t panel_begin,
                   int64_t panel_end) {
  const int64_t n = w.rows(), k = w.cols();
  if (m == 1) {
    for (int64_t p = panel_begin; p < panel_end; p += kRowNV) {
      const int nv = static_cast<int>(std::min<int64_t>(kRowNV, panel_end - p));
      if (w.is_blocked()) {
        kBlockedTiles[blocked_index(w.dtype())][nv - 1](x, k, w.blocked_panel(p), w.panel_bytes(), k,
                                                        y + p * kLanes, n, n - p * kLanes);
      } else {
        kRowTiles[nv - 1](x, k, w.data() + p * k * kLanes, k, y + p * kLanes, n, n - p * kLanes);
      }
    }
    return;
  }
  thread_local std::vector<float> unpacked;
  if (w.is_blocked() && unpacked.size() < static_cast<size_t>(kNV * k * kLanes)) unpacked.resize(kNV * k * kLanes);
  for (int64_t i0 = 0; i0 < m; i0 += kRowBlock) {
    const int64_t i_end = std::min(m, i0 + kRowBlock);
    for (int64_t p = panel_begin; p < panel_end; p += kNV) {
      const int nv = static_cast<int>(std::min<int64_t>(kNV, panel_end - p));
      const float* panels = unpacked.data();
      if (w.is_blocked()) {
        w.unpack_panels(p, nv, unpacked.data());
      } else {
        panels = w.data() + p * k * kLanes;
      }
      for (int64_t i = i0; i < i_end; i += kMR) {
        const int mr = static_cast<int>(std::min<int64_t>(kMR, i_end - i));
        kTiles[mr - 1][nv - 1](x + i * k, k, panels, k, y + i * n + p * kLanes, n, n - p * kLanes);
      }
    }
  }
}

}  // namespace

int matmul_panel_width() { return kLanes; }

void PackedMatrix::FreeDeleter::operator()(void* p) const { std::free(p); }

bool PackedMatrix::keeps_blocks(DType dtype, int64_t k) {
  return (dtype == DType::kQ8_0 || dtype == DType::kQ4_0 || dtype == DType::kQ4_1) && k > 0 && k % kBlock == 0;
}

PackedMatrix::PackedMatrix(int64_t n, int64_t k, DType dtype, const BlockRows& row_blocks, ThreadPool& pool)
    : dtype_(dtype), n_(n), k_(k) {
  if (!keeps_blocks(dtype, k)) throw Error("internal error: weights of this type cannot stay in blocks");
  const int64_t panels = num_panels(n);
  panel_bytes_ = static_cast<size_t>(k / kBlock) * group_bytes(dtype);
  bytes_ = std::max<size_t>(1, static_cast<size_t>(panels) * panel_bytes_);
  data_.reset(std::malloc(bytes_));
  if (!data_) throw Error("cannot allocate " + std::to_string(bytes_) + " bytes of weights");
  const int64_t block_bytes = dtype_block_bytes(dtype);
  const uint8_t* zero_block = dtype == DType::kQ4_0 ? kQ4_0ZeroBlock : kZeroBlock;
  pool.parallel_for(panels, [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) {
      const uint8_t* rows[kLanes];
      for (int l = 0; l < kLanes; ++l) rows[l] = p * kLanes + l < n ? row_blocks(p * kLanes + l) : nullptr;
      for (int64_t b = 0; b < k / kBlock; ++b) {
        const uint8_t* blocks[kLanes];
        for (int l = 0; l < kLanes; ++l) blocks[l] = rows[l] != nullptr ? rows[l] + b * block_bytes : zero_block;
        put_group(dtype, blocks, static_cast<uint8_t*>(data_.get()) + p * panel_bytes_ + b * group_bytes(dtype));
      }
    }
  });
}

void PackedMatrix::unpack_panels(int64_t panel, int count, float* out) const {
  for (int i = 0; i < count; ++i) {
    float* dst = out + i * k_ * kLanes;
    if (!is_blocked()) {
      std::memcpy(dst, data() + (panel + i) * k_ * kLanes, static_cast<size_t>(k_ * kLanes) * sizeof(float));
      continue;
    }
    const uint8_t* src = blocked_panel(panel + i);
    switch (dtype_) {
      case DType::kQ8_0: unpack_panel<DType::kQ8_0>(src, k_, dst); break;
      case DType::kQ4_0: unpack_panel<DType::kQ4_0>(src, k_, dst); break;
      default: unpack_panel<DType::kQ4_1>(src, k_, dst); break;
    }
  }
}

PackedMatrix::PackedMatrix(int64_t n, int64_t k, const RowFiller& fill, ThreadPool& pool) : n_(n), k_(k) {
  const int64_t panels = num_panels(n);
  const size_t count = static_cast<size_t>(std::max<int64_t>(1, panels * k * kLanes));
  bytes_ = count * sizeof(float);
  data_.reset(std::malloc(bytes_));
  if (!data_) throw Error("cannot allocate " + std::to_string(bytes_) + " bytes of weights");
  pool.parallel_for(panels, [&](int64_t begin, int64_t end) {
    std::vector<float> rows(static_cast<size_t>(kLanes * k));  // (kLanes, K) rows of one panel
    for (int64_t p = begin; p < end; ++p) {
      const int64_t valid = std::min<int64_t>(kLanes, n - p * kLanes);
      fill(p * kLanes, valid, rows.data());
      std::fill(rows.begin() + valid * k, rows.end(), 0.0f);
      float* panel = static_cast<float*>(data_.get()) + p * k * kLanes;
      for (int64_t c = 0; c < k; ++c)
        for (int l = 0; l < kLanes; ++l) panel[c * kLanes + l] = rows[static_cast<size_t>(l * k + c)];
    }
  });
}

void matmul(const float* x, const PackedMatrix& w, float* y, int64_t m, ThreadPool& pool) {
  const int64_t panels = num_panels(w.rows());
  // One-core cost of a panel: m x kLanes x K vector multiply-adds (~0.01 ns each) and kLanes x K weights
  // streamed from memory (~0.2 ns each, all of the cost when m is small).
  const double panel_ns = (0.01 * static_cast<double>(m) + 0.2) * kLanes * static_cast<double>(w.cols());
  const int64_t tile_panels = m == 1 ? kRowNV : kNV;  // chunks of whole tiles
  pool.parallel_for(panels, [&](int64_t begin, int64_t end) { matmul_panels(x, w, y, m, begin, end); },
                    /*align=*/tile_panels,
                    /*min_parallel=*/std::max<int64_t>(2 * tile_panels, min_parallel_items(panel_ns)));
}

void matmul_ref(const float* x, const float* w, float* y, int64_t m, int64_t n, int64_t k) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      float acc = 0.0f;
      for (int64_t p = 0; p < k; ++p) acc = std::fma(x[i * k + p], w[j * k + p], acc);
      y[i * n + j] = acc;
    }
  }
}

}  // namespace cbatch
