// The int8 matmul's AVX2 kernel (format: cpu_int8_format.hpp), for a CPU without AVX-512 VNNI: one row
// and one panel at a time, 8 lanes a vector, u widened to 16 bits and multiplied by the activations with
// _mm256_madd_epi16, so that each sub-block's product is the scalar reference's exact int32 sum and the
// fp32 steps follow in its order: the same bits. Compiled for AVX2, FMA and F16C with target attributes
// and chosen at run time (cpu_matmul_int8.cpp).
#include <algorithm>
#include <cstring>

#include "engine/cpu/cpu_int8_format.hpp"
#include "engine/cpu/cpu_int8_kernels.hpp"

#if defined(__x86_64__)
#include <immintrin.h>

namespace cbatch::matmul_detail {
namespace {

// Scale array entries i..i + 7 of int8 group b (int8_scale's values; not a superblock type's).
template <class F>
__attribute__((target("avx2,fma,f16c"))) __m256 int8_scales8(const uint8_t* panel, int64_t b, int i) {
  using L = Int8Layout<F>;
  const uint8_t* group = panel + b * L::kBytes;
  if constexpr (L::kHalfScales) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(group + 2 * i)));
  }
  if constexpr (L::kByteScales) {  // e8m0_half: (e - 1) << 23, or the subnormals 2^-128, 2^-127 for e < 2
    const __m256i e = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(group + i)));
    const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23);
    const __m256i subnormal = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e);
    return _mm256_castsi256_ps(_mm256_blendv_epi8(subnormal, normal, _mm256_cmpgt_epi32(e, _mm256_set1_epi32(1))));
  }
  return _mm256_loadu_ps(reinterpret_cast<const float*>(group) + i);
}

// A superblock type's header, read by the kernel: lanes i..i + 7 of the integer sub-scales of sub-block
// `sub` of group b, of the fp16 d (h = i) or -dmin (h = kLanes + i) as fp32, and the sum over the
// superblock's sub-blocks of m * sum(q) (sums: the row's sums per 16 k of the superblock).
template <class F>
__attribute__((target("avx2"))) __m256i super_sc8(const uint8_t* panel, int64_t b, int sub, int i) {
  const uint8_t* sc = super_byte<F>(panel, b, sub * GroupLayout<F>::kSubFloats + i);
  const __m128i c = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(sc));
  return Int8Layout<F>::kSignedSubScales ? _mm256_cvtepi8_epi32(c) : _mm256_cvtepu8_epi32(c);
}
template <class F>
__attribute__((target("avx2,f16c"))) __m256 super_half8(const uint8_t* panel, int64_t b, int h) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(super_half<F>(panel, b, h))));
}
template <class F>
__attribute__((target("avx2"))) __m256i super_mins8(const uint8_t* panel, int64_t b, int i, const int32_t* sums) {
  const uint8_t* m = super_m_quads<F>(panel, b);
  __m256i mins = _mm256_setzero_si256();
  for (int quad = 0; quad < Int8Layout<F>::kSuperSubs / 4; ++quad) {
    const __m256i m4 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(m + quad * kQuadBytes + 4 * i));
    for (int j = 0; j < 4; ++j) {
      const int sub = 4 * quad + j;
      const __m256i mj = _mm256_and_si256(_mm256_srli_epi32(m4, 8 * j), _mm256_set1_epi32(0xFF));
      mins = _mm256_add_epi32(mins, _mm256_mullo_epi32(mj, _mm256_set1_epi32(sums[2 * sub] + sums[2 * sub + 1])));
    }
  }
  return mins;
}

// A high-bit plane moved so that quad i of its bytes (i * kBits up) sits at bit 4, where its u's high bits
// go. The 16-bit shifts move no wanted bit across a byte: the caller keeps only those bits.
template <int kBits>
__attribute__((target("avx2"))) __m256i high_at_bit4(__m256i high, int i) {
  const int shift = 4 - kBits * i;
  if (shift == 0) return high;
  return shift > 0 ? _mm256_sll_epi16(high, _mm_cvtsi32_si128(shift))
                   : _mm256_srl_epi16(high, _mm_cvtsi32_si128(-shift));
}

// Quad t of an int8 group's codes, 8 lanes from lane 8c (panel_code's u, a vector at a time).
template <class F>
__attribute__((target("avx2"))) __m256i quad8(const uint8_t* codes, int t, int c) {
  using L = Int8Layout<F>;
  if constexpr (!L::kNibblePlane) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes + t * kQuadBytes + c * 32));
  }
  const __m256i pair = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes + (t / 2) * kQuadBytes + c * 32));
  const __m256i low = _mm256_and_si256(t % 2 == 0 ? pair : _mm256_srli_epi16(pair, 4), _mm256_set1_epi8(0x0F));
  if constexpr (L::kTableNibbles) {
    const __m128i table = _mm_load_si128(reinterpret_cast<const __m128i*>(NibbleTable<F>::kU.data()));
    return _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(table), low);
  }
  if constexpr (L::kHighBits == 0) return low;
  const int per = L::kQuadsPerHighByte;
  const __m256i high =
      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes + (kQuads / 2 + t / per) * kQuadBytes + c * 32));
  const __m256i mask = _mm256_set1_epi8(static_cast<char>(((1 << L::kHighBits) - 1) << 4));
  return _mm256_or_si256(low, _mm256_and_si256(high_at_bit4<L::kHighBits>(high, t % per), mask));
}

// One row, one panel, 8 lanes at a time: u widened to 16 bits, _mm256_madd_epi16 sums pairs of k exactly,
// a horizontal add finishes each lane's quad.
template <class F>
__attribute__((target("avx2,fma,f16c"))) void panel_row_avx2(const Q8Rows& x, int64_t row, const uint8_t* panel, float* y,
                                                         int64_t cols) {
  using L = Int8Layout<F>;
  using G = GroupLayout<F>;
  constexpr int kChunks = kLanes / 8;
  const int64_t k = x.cols;
  const int8_t* q = x.q.data() + row * k;
  const float* d = x.d.data() + row * (k / x.block);
  const int32_t* sums = x.sums.data() + row * (k / 16);
  __m256 acc[kChunks];
  __m256i tot[kChunks];  // a superblock's integer sums
  for (auto& a : acc) a = _mm256_setzero_ps();
  for (auto& t : tot) t = _mm256_setzero_si256();
  for (int64_t b = 0; b < k / kGroupK; ++b) {
    const uint8_t* codes = int8_codes<F>(panel, b);
    for (int sub = 0; sub < G::kSubs; ++sub) {
      const int s = sub * G::kSubFloats;
      const int32_t sum_q = sub_sum<F>(sums, b, sub);
      for (int c = 0; c < kChunks; ++c) {
        __m256i pairs0 = _mm256_setzero_si256(), pairs1 = _mm256_setzero_si256();
        CBATCH_UNROLL_QUADS
        for (int t = sub * L::kQuadsPerSub; t < (sub + 1) * L::kQuadsPerSub; ++t) {
          const __m256i u = quad8<F>(codes, t, c);
          const int8_t* qt = q + b * kGroupK + 4 * t;
          const __m256i qv = _mm256_setr_epi16(qt[0], qt[1], qt[2], qt[3], qt[0], qt[1], qt[2], qt[3], qt[0], qt[1],
                                               qt[2], qt[3], qt[0], qt[1], qt[2], qt[3]);
          pairs0 = _mm256_add_epi32(pairs0, _mm256_madd_epi16(_mm256_cvtepu8_epi16(_mm256_castsi256_si128(u)), qv));
          pairs1 = _mm256_add_epi32(pairs1, _mm256_madd_epi16(_mm256_cvtepu8_epi16(_mm256_extracti128_si256(u, 1)), qv));
        }
        // hadd leaves lanes 0 1 4 5 | 2 3 6 7; the permute puts them in order.
        __m256i isum = _mm256_permute4x64_epi64(_mm256_hadd_epi32(pairs0, pairs1), 0xD8);
        isum = _mm256_add_epi32(isum, _mm256_set1_epi32(L::kBias * sum_q));
        if constexpr (L::kZeroPoints) {  // - z * sum(q), exact in int32
          const __m256i zero = _mm256_cvttps_epi32(int8_scales8<F>(panel, b, kLanes + c * 8));
          isum = _mm256_sub_epi32(isum, _mm256_mullo_epi32(zero, _mm256_set1_epi32(sum_q)));
        }
        if constexpr (L::kSuper) {
          tot[c] = _mm256_add_epi32(tot[c], _mm256_mullo_epi32(isum, super_sc8<F>(panel, b, sub, c * 8)));
          continue;
        }
        const __m256 scale = _mm256_mul_ps(int8_scales8<F>(panel, b, s + c * 8), _mm256_set1_ps(d[b]));
        acc[c] = _mm256_fmadd_ps(scale, _mm256_cvtepi32_ps(isum), acc[c]);
        if constexpr (L::kOffset) {
          acc[c] = _mm256_fmadd_ps(int8_scales8<F>(panel, b, s + kLanes + c * 8), _mm256_set1_ps(d[b] * static_cast<float>(sum_q)),
                                   acc[c]);
        }
      }
    }
    if constexpr (L::kSuper) {
      if (b % L::kSuperGroups != L::kSuperGroups - 1) continue;
      const __m256 dx = _mm256_set1_ps(d[b / L::kSuperGroups]);
      for (int c = 0; c < kChunks; ++c) {
        __m256 sum = _mm256_mul_ps(super_half8<F>(panel, b, c * 8), _mm256_cvtepi32_ps(tot[c]));
        if constexpr (G::kHasOffset) {
          const int64_t first = b - (L::kSuperGroups - 1);  // the superblock's first group
          const __m256i mins = super_mins8<F>(panel, b, c * 8, sums + first * 2);
          sum = _mm256_fmadd_ps(super_half8<F>(panel, b, kLanes + c * 8), _mm256_cvtepi32_ps(mins), sum);
        }
        acc[c] = _mm256_fmadd_ps(sum, dx, acc[c]);
        tot[c] = _mm256_setzero_si256();
      }
    }
  }
  float out[kLanes];
  for (int c = 0; c < kChunks; ++c) _mm256_storeu_ps(out + c * 8, acc[c]);
  std::memcpy(y, out, static_cast<size_t>(std::min<int64_t>(cols, kLanes)) * sizeof(float));
}

}  // namespace

void run_int8_panels_avx2(DType dtype, bool planes, const Q8Rows& x, int64_t row_begin, int64_t row_end,
                          const uint8_t* panels, size_t panel_bytes, int64_t panel_begin, int64_t panel_end,
                          float* y, int64_t ldy, int64_t n) {
  with_int8_format(dtype, planes, [&](auto format) {
    using F = decltype(format);
    for (int64_t p = panel_begin; p < panel_end; ++p) {
      const uint8_t* panel = panels + p * panel_bytes;
      const int64_t cols = n - p * kLanes;
      float* yp = y + p * kLanes;
      for (int64_t r = row_begin; r < row_end; ++r) panel_row_avx2<F>(x, r, panel, yp + r * ldy, cols);
    }
  });
}

}  // namespace cbatch::matmul_detail

#endif  // __x86_64__
