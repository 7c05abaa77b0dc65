// The int8 matmul's AVX-512 VNNI kernels (format: cpu_int8_format.hpp): register tiles of up to 4 rows x 3
// panels of 16 lanes, and a one-row kernel for decode steps, both multiplying u8 weights by s8 activations
// with vpdpbusd (exact int32 sums, as the scalar reference's, then its fp32 steps in its order: the same
// bits); and quantize_rows_q8's block arithmetic with AVX-512. Compiled for their instruction sets with
// target attributes and chosen at run time (cpu_matmul_int8.cpp).
#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

#include "engine/cpu/cpu_int8_format.hpp"
#include "engine/cpu/cpu_int8_kernels.hpp"

// GCC 12's false positive on the AVX-512 conversions' and reductions' undefined pass-through operand
// (cpu_matmul_blocks.hpp), reported where the kernels are inlined.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#if defined(__x86_64__)
#include <immintrin.h>

namespace cbatch::matmul_detail {
namespace {

int32_t load_quad(const int8_t* q) {
  int32_t v;
  std::memcpy(&v, q, sizeof(v));
  return v;
}

// Scale array entries i..i + 15 of int8 group b (not a superblock type's).
template <class F>
__attribute__((target("avx512f"))) __m512 int8_scales16(const uint8_t* panel, int64_t b, int i) {
  using L = Int8Layout<F>;
  const uint8_t* group = panel + b * L::kBytes;
  if constexpr (L::kHalfScales) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(group + 2 * i)));
  }
  if constexpr (L::kByteScales) {  // e8m0_half: (e - 1) << 23, or the subnormals 2^-128, 2^-127 for e < 2
    const __m512i e = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(group + i)));
    const __m512i normal = _mm512_slli_epi32(_mm512_sub_epi32(e, _mm512_set1_epi32(1)), 23);
    const __m512i subnormal = _mm512_sllv_epi32(_mm512_set1_epi32(0x00200000), e);
    const __mmask16 is_normal = _mm512_cmpgt_epi32_mask(e, _mm512_set1_epi32(1));
    return _mm512_castsi512_ps(_mm512_mask_blend_epi32(is_normal, subnormal, normal));
  }
  return _mm512_loadu_ps(reinterpret_cast<const float*>(group) + i);
}

// A superblock type's header, read by the kernels: the 16 lanes' integer sub-scales of sub-block `sub` of
// group b, the fp16 d (h = 0) or -dmin (h = kLanes) as fp32, and the sum over the superblock's sub-blocks
// of m * sum(q) (from the row's split_sums).
template <class F>
__attribute__((target("avx512f"))) __m512i super_sc16(const uint8_t* panel, int64_t b, int sub) {
  const uint8_t* sc = super_byte<F>(panel, b, sub * GroupLayout<F>::kSubFloats);
  const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(sc));
  return Int8Layout<F>::kSignedSubScales ? _mm512_cvtepi8_epi32(c) : _mm512_cvtepu8_epi32(c);
}
template <class F>
__attribute__((target("avx512f"))) __m512 super_half16(const uint8_t* panel, int64_t b, int h) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(super_half<F>(panel, b, h))));
}
// m's two quads (m0, m1) times the split sums: 128 * (m . h) + m . l, exactly sum(m * s).
__attribute__((target("avx512f,avx512vnni"))) __m512i super_mins16(__m512i m0, __m512i m1, const int32_t* split) {
  __m512i piece[2];
  for (int i = 0; i < 2; ++i) {
    piece[i] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), m0, _mm512_set1_epi32(split[2 * i])), m1,
                                   _mm512_set1_epi32(split[2 * i + 1]));
  }
  return _mm512_add_epi32(_mm512_slli_epi32(piece[0], 7), piece[1]);
}

// A high-bit plane moved so that quad i of its bytes (i * kBits up) sits at bit 4, where its u's high bits
// go. The 16-bit shifts move no wanted bit across a byte: the caller keeps only those bits.
template <int kBits>
__attribute__((target("avx512f,avx512bw"))) __m512i high_at_bit4(__m512i high, int i) {
  const int shift = 4 - kBits * i;
  if (shift == 0) return high;
  return shift > 0 ? _mm512_sll_epi16(high, _mm_cvtsi32_si128(shift))
                   : _mm512_srl_epi16(high, _mm_cvtsi32_si128(-shift));
}

// Quads t and t + 1 (t even) of an int8 group's codes, all 16 lanes: a nibble load serves both, and a
// wide type's high bits join with one ternary-logic step each.
template <class F>
__attribute__((target("avx512f,avx512bw"))) void quad_pair16(const uint8_t* codes, int t, __m512i& u0, __m512i& u1) {
  using L = Int8Layout<F>;
  if constexpr (!L::kNibblePlane) {
    u0 = _mm512_loadu_si512(codes + t * kQuadBytes);
    u1 = _mm512_loadu_si512(codes + (t + 1) * kQuadBytes);
    return;
  }
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  const __m512i pair = _mm512_loadu_si512(codes + (t / 2) * kQuadBytes);
  if constexpr (L::kHighBits == 0) {
    u0 = _mm512_and_si512(pair, low4);
    u1 = _mm512_and_si512(_mm512_srli_epi16(pair, 4), low4);
    if constexpr (L::kTableNibbles) {
      const __m512i table = _mm512_broadcast_i32x4(
          _mm_load_si128(reinterpret_cast<const __m128i*>(NibbleTable<F>::kU.data())));
      u0 = _mm512_shuffle_epi8(table, u0);
      u1 = _mm512_shuffle_epi8(table, u1);
    }
    return;
  }
  const int per = L::kQuadsPerHighByte;
  const __m512i high = _mm512_loadu_si512(codes + (kQuads / 2 + t / per) * kQuadBytes);
  const __m512i mask = _mm512_set1_epi8(static_cast<char>(((1 << L::kHighBits) - 1) << 4));
  const __m512i high0 = _mm512_and_si512(high_at_bit4<L::kHighBits>(high, t % per), mask);
  const __m512i high1 = _mm512_and_si512(high_at_bit4<L::kHighBits>(high, (t + 1) % per), mask);
  constexpr int kLowOrHigh = 0xEC;  // (a & c) | b
  u0 = _mm512_ternarylogic_epi32(pair, high0, low4, kLowOrHigh);
  u1 = _mm512_ternarylogic_epi32(_mm512_srli_epi16(pair, 4), high1, low4, kLowOrHigh);
}

// MR rows x NV panels of 16 lanes: each quad of weights is loaded once and multiplied into every row
// with vpdpbusd (u8 weights x s8 activations, 4 k summed into each int32 lane); MR x NV independent
// accumulator chains hide its latency (integer sums: their order changes no bit). A superblock type's
// sub-block sums are scaled by their sc in int32 (vpmulld) and go to fp32 once per superblock.
template <class F, int MR, int NV>
__attribute__((target("avx512f,avx512bw,avx512vnni"))) void tile_vnni(const Q8Rows& x, int64_t row,
                                                                     const uint8_t* panels, size_t panel_bytes,
                                                                     float* y, int64_t ldy, int64_t cols) {
  using L = Int8Layout<F>;
  using G = GroupLayout<F>;
  const int64_t k = x.cols;
  __m512 acc[MR][NV];
  __m512i tot[MR][NV];  // a superblock type's integer sums over the superblock
  for (auto& row_acc : acc)
    for (auto& a : row_acc) a = _mm512_setzero_ps();
  for (auto& row_tot : tot)
    for (auto& t : row_tot) t = _mm512_setzero_si512();
  for (int64_t b = 0; b < k / kGroupK; ++b) {
    const uint8_t* group_codes[NV];
    for (int v = 0; v < NV; ++v) group_codes[v] = int8_codes<F>(panels + v * panel_bytes, b);
    for (int sub = 0; sub < G::kSubs; ++sub) {
      __m512i isum[MR][NV];
      for (auto& row_sum : isum)
        for (auto& v : row_sum) v = _mm512_setzero_si512();
      // Two quads a step: a nibble load serves both, and each activation quad is broadcast from memory
      // into the vpdpbusd that uses it, leaving the registers to the integer and fp32 sums.
      CBATCH_UNROLL_QUADS
      for (int t = sub * L::kQuadsPerSub; t < (sub + 1) * L::kQuadsPerSub; t += 2) {
        for (int v = 0; v < NV; ++v) {
          __m512i u0, u1;
          quad_pair16<F>(group_codes[v], t, u0, u1);
          for (int r = 0; r < MR; ++r) {
            const int8_t* qt = x.q.data() + (row + r) * k + b * kGroupK + 4 * t;
            isum[r][v] = _mm512_dpbusd_epi32(isum[r][v], u0, _mm512_set1_epi32(load_quad(qt)));
            isum[r][v] = _mm512_dpbusd_epi32(isum[r][v], u1, _mm512_set1_epi32(load_quad(qt + 4)));
          }
        }
      }
      if constexpr (L::kSuper) {
        __m512i sc[NV];
        for (int v = 0; v < NV; ++v) sc[v] = super_sc16<F>(panels + v * panel_bytes, b, sub);
        for (int r = 0; r < MR; ++r) {
          const __m512i bias = _mm512_set1_epi32(L::kBias * sub_sum<F>(x.sums.data() + (row + r) * (k / 16), b, sub));
          for (int v = 0; v < NV; ++v) {
            const __m512i biased = L::kBias == 0 ? isum[r][v] : _mm512_add_epi32(isum[r][v], bias);
            tot[r][v] = _mm512_add_epi32(tot[r][v], _mm512_mullo_epi32(biased, sc[v]));
          }
        }
        continue;
      }
      const int s = sub * G::kSubFloats;
      __m512 scale[NV], offset[NV];
      __m512i zero[NV];  // a zero-point type's z
      for (int v = 0; v < NV; ++v) {
        scale[v] = int8_scales16<F>(panels + v * panel_bytes, b, s);
        if constexpr (L::kOffset) offset[v] = int8_scales16<F>(panels + v * panel_bytes, b, s + kLanes);
        if constexpr (L::kZeroPoints) {
          zero[v] = _mm512_cvttps_epi32(int8_scales16<F>(panels + v * panel_bytes, b, kLanes));
        }
      }
      for (int r = 0; r < MR; ++r) {
        const int32_t sum_q = sub_sum<F>(x.sums.data() + (row + r) * (k / 16), b, sub);
        const float dr = x.d[static_cast<size_t>((row + r) * (k / kGroupK) + b)];
        const __m512i bias = _mm512_set1_epi32(L::kBias * sum_q);
        for (int v = 0; v < NV; ++v) {
          __m512i biased = _mm512_add_epi32(isum[r][v], bias);
          if constexpr (L::kZeroPoints) {  // - z * sum(q), exact in int32
            biased = _mm512_sub_epi32(biased, _mm512_mullo_epi32(zero[v], _mm512_set1_epi32(sum_q)));
          }
          const __m512 isum_f = _mm512_cvtepi32_ps(biased);
          acc[r][v] = _mm512_fmadd_ps(_mm512_mul_ps(scale[v], _mm512_set1_ps(dr)), isum_f, acc[r][v]);
          if constexpr (L::kOffset) {
            acc[r][v] = _mm512_fmadd_ps(offset[v], _mm512_set1_ps(dr * static_cast<float>(sum_q)), acc[r][v]);
          }
        }
      }
    }
    if constexpr (L::kSuper) {
      if (b % L::kSuperGroups != L::kSuperGroups - 1) continue;
      const int64_t supers = k / kSuperK, sb = b / L::kSuperGroups;
      __m512 dv[NV], neg_dmin[NV];
      __m512i m0[NV], m1[NV];
      for (int v = 0; v < NV; ++v) {
        const uint8_t* panel = panels + v * panel_bytes;
        dv[v] = super_half16<F>(panel, b, 0);
        if constexpr (G::kHasOffset) {
          neg_dmin[v] = super_half16<F>(panel, b, kLanes);
          m0[v] = _mm512_loadu_si512(super_m_quads<F>(panel, b));
          m1[v] = _mm512_loadu_si512(super_m_quads<F>(panel, b) + kQuadBytes);
        }
      }
      for (int r = 0; r < MR; ++r) {
        const __m512 dx = _mm512_set1_ps(x.d[static_cast<size_t>((row + r) * supers + sb)]);
        const int32_t* split = &x.split_sums[static_cast<size_t>(((row + r) * supers + sb) * 4)];
        for (int v = 0; v < NV; ++v) {
          __m512 sum = _mm512_mul_ps(dv[v], _mm512_cvtepi32_ps(tot[r][v]));
          if constexpr (G::kHasOffset) {
            sum = _mm512_fmadd_ps(neg_dmin[v], _mm512_cvtepi32_ps(super_mins16(m0[v], m1[v], split)), sum);
          }
          acc[r][v] = _mm512_fmadd_ps(sum, dx, acc[r][v]);
          tot[r][v] = _mm512_setzero_si512();
        }
      }
    }
  }
  for (int v = 0; v < NV; ++v) {
    const int64_t valid = std::min<int64_t>(16, cols - v * 16);
    if (valid <= 0) break;
    const __mmask16 mask = valid == 16 ? 0xFFFF : static_cast<__mmask16>((1u << valid) - 1);
    for (int r = 0; r < MR; ++r) _mm512_mask_storeu_ps(y + r * ldy + v * 16, mask, acc[r][v]);
  }
}

// One row, one panel: a decode step's product. tile_vnni's arithmetic, but panel by panel, so that each
// thread reads one sequential stream (several panels side by side are several streams some KB apart,
// which measured 1.4x slower from memory), with each group's quads split between two integer
// accumulators (even and odd quads; the sum is exact either way) to halve the vpdpbusd chain, and a
// nibble load serving both quads it holds.
template <class F>
__attribute__((target("avx512f,avx512bw,avx512vnni"))) void row_vnni(const Q8Rows& x, int64_t row,
                                                                    const uint8_t* panel, float* y, int64_t cols) {
  using L = Int8Layout<F>;
  using G = GroupLayout<F>;
  const int64_t k = x.cols;
  const int8_t* q = x.q.data() + row * k;
  const float* d = x.d.data() + row * (k / x.block);
  const int32_t* sums = x.sums.data() + row * (k / 16);
  __m512 acc = _mm512_setzero_ps();
  __m512i tot = _mm512_setzero_si512();  // a superblock's integer sum
  for (int64_t b = 0; b < k / kGroupK; ++b) {
    const uint8_t* codes = int8_codes<F>(panel, b);
    const int8_t* qb = q + b * kGroupK;
    for (int sub = 0; sub < G::kSubs; ++sub) {
      __m512i even = _mm512_setzero_si512(), odd = _mm512_setzero_si512();
      CBATCH_UNROLL_QUADS
      for (int t = sub * L::kQuadsPerSub; t < (sub + 1) * L::kQuadsPerSub; t += 2) {
        __m512i u0, u1;
        quad_pair16<F>(codes, t, u0, u1);
        even = _mm512_dpbusd_epi32(even, u0, _mm512_set1_epi32(load_quad(qb + 4 * t)));
        odd = _mm512_dpbusd_epi32(odd, u1, _mm512_set1_epi32(load_quad(qb + 4 * t + 4)));
      }
      const int32_t sum_q = sub_sum<F>(sums, b, sub);
      __m512i isum = _mm512_add_epi32(_mm512_add_epi32(even, odd), _mm512_set1_epi32(L::kBias * sum_q));
      if constexpr (L::kZeroPoints) {  // - z * sum(q), exact in int32
        const __m512i zero = _mm512_cvttps_epi32(int8_scales16<F>(panel, b, kLanes));
        isum = _mm512_sub_epi32(isum, _mm512_mullo_epi32(zero, _mm512_set1_epi32(sum_q)));
      }
      if constexpr (L::kSuper) {
        tot = _mm512_add_epi32(tot, _mm512_mullo_epi32(isum, super_sc16<F>(panel, b, sub)));
        continue;
      }
      const int s = sub * G::kSubFloats;
      acc = _mm512_fmadd_ps(_mm512_mul_ps(int8_scales16<F>(panel, b, s), _mm512_set1_ps(d[b])), _mm512_cvtepi32_ps(isum),
                            acc);
      if constexpr (L::kOffset) {
        acc = _mm512_fmadd_ps(int8_scales16<F>(panel, b, s + kLanes), _mm512_set1_ps(d[b] * static_cast<float>(sum_q)),
                              acc);
      }
    }
    if constexpr (L::kSuper) {
      if (b % L::kSuperGroups != L::kSuperGroups - 1) continue;
      const int64_t sb = b / L::kSuperGroups;
      const __m512 dx = _mm512_set1_ps(d[sb]);
      __m512 sum = _mm512_mul_ps(super_half16<F>(panel, b, 0), _mm512_cvtepi32_ps(tot));
      if constexpr (G::kHasOffset) {
        const uint8_t* m = super_m_quads<F>(panel, b);
        const __m512i mins = super_mins16(_mm512_loadu_si512(m), _mm512_loadu_si512(m + kQuadBytes),
                                          &x.split_sums[static_cast<size_t>((row * (k / kSuperK) + sb) * 4)]);
        sum = _mm512_fmadd_ps(super_half16<F>(panel, b, kLanes), _mm512_cvtepi32_ps(mins), sum);
      }
      acc = _mm512_fmadd_ps(sum, dx, acc);
      tot = _mm512_setzero_si512();
    }
  }
  const int64_t valid = std::min<int64_t>(16, cols);
  _mm512_mask_storeu_ps(y, valid == 16 ? 0xFFFF : static_cast<__mmask16>((1u << valid) - 1), acc);
}

constexpr int kVnniRows = 4;    // a VNNI tile: up to 4 rows x 3 panels, 24 accumulators of 32 registers
constexpr int kVnniPanels = kInt8TilePanels;

using VnniTileFn = void (*)(const Q8Rows&, int64_t, const uint8_t*, size_t, float*, int64_t, int64_t);

template <class F, int MR, int... NVs>
constexpr std::array<VnniTileFn, kVnniPanels> vnni_tile_row(std::integer_sequence<int, NVs...>) {
  return {&tile_vnni<F, MR, NVs + 1>...};
}

// vnni_tiles<F>[mr - 1][nv - 1]: an mr-row, nv-panel tile.
template <class F, int... MRs>
constexpr std::array<std::array<VnniTileFn, kVnniPanels>, kVnniRows> vnni_tile_table(std::integer_sequence<int, MRs...>) {
  return {vnni_tile_row<F, MRs + 1>(std::make_integer_sequence<int, kVnniPanels>{})...};
}
template <class F>
constexpr auto vnni_tiles = vnni_tile_table<F>(std::make_integer_sequence<int, kVnniRows>{});

}  // namespace

// quantize_block's arithmetic (cpu_matmul_int8.cpp) on n floats (a multiple of 16): the same products,
// roundings and clamps, so the same bytes.
__attribute__((target("avx512f,avx512bw"))) void quantize_block_avx512(const float* xb, int n, float d, int8_t* q,
                                                                       int32_t* sums) {
  const __m512 id = _mm512_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);
  const __m512 lo = _mm512_set1_ps(-127.0f), hi = _mm512_set1_ps(127.0f);
  for (int i = 0; i < n; i += 16) {
    const __m512 r =
        _mm512_roundscale_ps(_mm512_mul_ps(_mm512_loadu_ps(xb + i), id), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512i v = _mm512_cvtps_epi32(_mm512_min_ps(_mm512_max_ps(r, lo), hi));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + i), _mm512_cvtepi32_epi8(v));
    sums[i / 16] = _mm512_reduce_add_epi32(v);
  }
}
__attribute__((target("avx512f"))) float abs_max_avx512(const float* x, int n) {
  __m512 amax = _mm512_setzero_ps();
  for (int i = 0; i < n; i += 16) amax = _mm512_max_ps(amax, _mm512_abs_ps(_mm512_loadu_ps(x + i)));
  return _mm512_reduce_max_ps(amax);
}

void run_int8_panels_avx512_vnni(DType dtype, bool planes, const Q8Rows& x, int64_t row_begin, int64_t row_end,
                                 const uint8_t* panels, size_t panel_bytes, int64_t panel_begin, int64_t panel_end,
                                 float* y, int64_t ldy, int64_t n) {
  with_int8_format(dtype, planes, [&](auto format) {
    using F = decltype(format);
    if (row_end - row_begin == 1) {
      for (int64_t p = panel_begin; p < panel_end; ++p) {
        row_vnni<F>(x, row_begin, panels + p * panel_bytes, y + row_begin * ldy + p * kLanes, n - p * kLanes);
      }
      return;
    }
    for (int64_t p = panel_begin; p < panel_end; p += kVnniPanels) {
      const int nv = static_cast<int>(std::min<int64_t>(kVnniPanels, panel_end - p));
      for (int64_t r = row_begin; r < row_end; r += kVnniRows) {
        const int mr = static_cast<int>(std::min<int64_t>(kVnniRows, row_end - r));
        vnni_tiles<F>[mr - 1][nv - 1](x, r, panels + p * panel_bytes, panel_bytes, y + r * ldy + p * kLanes, ldy,
                                      n - p * kLanes);
      }
    }
  });
}

}  // namespace cbatch::matmul_detail

#endif  // __x86_64__
