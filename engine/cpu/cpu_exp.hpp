// Internal to the CPU ops: e^x in fp32 by way of double, exp_fp32's arithmetic (cpu_ops.hpp), inline for
// the loops over it (cpu_ops.cpp, cpu_attention.cpp), and its AVX-512 form for the files that choose
// AVX-512 at run time (cpu_glu_avx512.cpp, cpu_attention_avx512.cpp).
// e^t = 2^k (expm1(r) + 1) for t = k ln2 + r, |r| <= ln2 / 2, in double, expm1(r) by its Taylor series to
// r^13 / 13! (the next term is below 1e-17 of it); exp_fp32 takes 2^k expm1(r) + 2^k as one fused
// multiply-add, t clamped to [-104, 89] (outside, e^t rounds to 0 or overflows in fp32 anyway), then rounds
// to fp32. Every step is an IEEE operation in a fixed order, so the scalar and vector forms give the same bits.
#pragma once
#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace cbatch::exp_detail {

inline constexpr float kExpMin = -104.0f;  // e^-104 is below half the least fp32 subnormal
inline constexpr float kExpMax = 89.0f;    // e^89 is above the largest fp32
inline constexpr double kInvLn2 = 1.4426950408889634;      // 1 / ln 2
inline constexpr double kLn2High = 0.6931471805599453;     // ln 2 rounded to double
inline constexpr double kLn2Low = 2.3190468138462996e-17;  // ln 2 - kLn2High
inline constexpr int kExpm1Terms = 13;
// 1 / 1!, 1 / 2!, ..., 1 / 13!: expm1(r) = r (c[0] + r (c[1] + ...)).
inline constexpr std::array<double, kExpm1Terms> kExpm1Taylor = [] {
  std::array<double, kExpm1Terms> c{};
  double factorial = 1.0;  // exact: 13! < 2^53
  for (size_t n = 1; n <= c.size(); ++n) {
    factorial *= static_cast<double>(n);
    c[n - 1] = 1.0 / factorial;
  }
  return c;
}();

// e^t = s (expm1(r) + 1): s = 2^k, exact, and rq = expm1(r), for t = k ln2 + r, |r| <= ln2 / 2 (|t| below
// 700, where 2^k is a normal double).
inline void exp_parts(double t, double& s, double& rq) {
  const double k = std::nearbyint(t * kInvLn2);
  double r = std::fma(-k, kLn2High, t);
  r = std::fma(-k, kLn2Low, r);
  double q = kExpm1Taylor[kExpm1Terms - 1];
  for (int i = kExpm1Terms - 2; i >= 0; --i) q = std::fma(q, r, kExpm1Taylor[static_cast<size_t>(i)]);
  s = std::bit_cast<double>(static_cast<uint64_t>(static_cast<int64_t>(k) + 1023) << 52);
  rq = r * q;
}

// exp_fp32 (cpu_ops.hpp).
inline float exp_fp32_inline(float x) {
  if (std::isnan(x)) return x;
  double s, rq;
  exp_parts(std::clamp(x, kExpMin, kExpMax), s, rq);
  return static_cast<float>(std::fma(s, rq, s));  // 2^k expm1(r) + 2^k, one rounding
}

#if defined(__x86_64__)

#define CBATCH_EXP_AVX512 __attribute__((target("avx512f,avx512dq")))

// e^t = s (expm1(r) + 1) for 8 lanes of t (|t| small enough that 2^k is a normal double): s = 2^k, exact,
// and rq = expm1(r), as exp_parts computes them.
CBATCH_EXP_AVX512 inline void exp_parts8(__m512d t, __m512d& s, __m512d& rq) {
  const __m512d k = _mm512_roundscale_pd(_mm512_mul_pd(t, _mm512_set1_pd(kInvLn2)),
                                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512d r = _mm512_fnmadd_pd(k, _mm512_set1_pd(kLn2High), t);  // fma(-k, high, t)
  r = _mm512_fnmadd_pd(k, _mm512_set1_pd(kLn2Low), r);
  __m512d q = _mm512_set1_pd(kExpm1Taylor[kExpm1Terms - 1]);
  for (int i = kExpm1Terms - 2; i >= 0; --i) q = _mm512_fmadd_pd(q, r, _mm512_set1_pd(kExpm1Taylor[static_cast<size_t>(i)]));
  s = _mm512_scalef_pd(_mm512_set1_pd(1.0), k);
  rq = _mm512_mul_pd(r, q);
}

// e^t for 8 lanes of t already clamped to [kExpMin, kExpMax], as exp_fp32_inline computes it before the
// rounding to fp32.
CBATCH_EXP_AVX512 inline __m512d exp8(__m512d t) {
  __m512d s, rq;
  exp_parts8(t, s, rq);
  return _mm512_fmadd_pd(s, rq, s);
}

// exp_fp32 on 16 lanes.
CBATCH_EXP_AVX512 inline __m512 exp16(__m512 x) {
  const __m512 t = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(kExpMin)), _mm512_set1_ps(kExpMax));  // NaN: kExpMin
  const __m256 low = _mm512_cvtpd_ps(exp8(_mm512_cvtps_pd(_mm512_castps512_ps256(t))));
  const __m256 high = _mm512_cvtpd_ps(exp8(_mm512_cvtps_pd(_mm512_extractf32x8_ps(t, 1))));
  const __m512 y = _mm512_insertf32x8(_mm512_castps256_ps512(low), high, 1);
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), y, x);
}

#undef CBATCH_EXP_AVX512

#endif

}  // namespace cbatch::exp_detail
