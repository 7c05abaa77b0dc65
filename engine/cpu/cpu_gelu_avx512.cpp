// GeGLU with AVX-512 (cpu_gelu_avx512.hpp): gelu_tanh and tanh_rational of cpu_ops.cpp, operation for
// operation, on 16 lanes (the rational in double, 8 lanes at a time).
#include "engine/cpu/cpu_gelu_avx512.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

// GCC 12's false positive on the AVX-512 intrinsics' undefined pass-through operand (as in the int8 kernels).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace cbatch::gelu_detail {

#if defined(__x86_64__)
namespace {

#define CBATCH_AVX512 __attribute__((target("avx512f,avx512dq")))

constexpr double kNum[] = {0x1p+0, 0x1.30877b8b72d33p-3, 0x1.694aa09ae9e5ep-8, 0x1.4101377abb729p-14,
                           0x1.e0392b1db0018p-22, 0x1.2533756e546f7p-30, 0x1.d62e5abe6ae8ap-41, 0x1.b06be534182dep-54};
constexpr double kDen[] = {0x1p+0, 0x1.ed99131b0ebeap-2, 0x1.0d27ed6c95a69p-5, 0x1.7cbdaca0e9fccp-11,
                           0x1.b4e60b892578ep-18, 0x1.a6f707c5c71abp-26, 0x1.35a8b6e2cd94cp-35, 0x1.ca8230677aa01p-47};
constexpr float kOne = 0x1.205966p+3f;  // tanh_rational's: from here on tanh rounds to +-1

// c[i] + z2 c[i + 1]
CBATCH_AVX512 inline __m512d pair(const double* c, int i, __m512d z2) {
  return _mm512_fmadd_pd(z2, _mm512_set1_pd(c[i + 1]), _mm512_set1_pd(c[i]));
}

// c0 + z2 c1 + z4 (c2 + z2 c3) + z8 (c4 + z2 c5 + z4 (c6 + z2 c7)), nested as tanh_rational nests it.
CBATCH_AVX512 inline __m512d poly(const double* c, __m512d z2, __m512d z4, __m512d z8) {
  const __m512d high = _mm512_fmadd_pd(z4, pair(c, 6, z2), pair(c, 4, z2));
  const __m512d low = _mm512_fmadd_pd(z4, pair(c, 2, z2), pair(c, 0, z2));
  return _mm512_fmadd_pd(z8, high, low);
}

// (z N / D) rounded to fp32 for 8 lanes of z (already clamped).
CBATCH_AVX512 inline __m256 rational8(__m256 zf) {
  const __m512d z = _mm512_cvtps_pd(zf);
  const __m512d z2 = _mm512_mul_pd(z, z), z4 = _mm512_mul_pd(z2, z2), z8 = _mm512_mul_pd(z4, z4);
  return _mm512_cvtpd_ps(_mm512_div_pd(_mm512_mul_pd(z, poly(kNum, z2, z4, z8)), poly(kDen, z2, z4, z8)));
}

CBATCH_AVX512 inline __m512 tanh16(__m512 x) {
  const __m512 one = _mm512_set1_ps(kOne);
  const __m512 neg_one = _mm512_set1_ps(-kOne);
  __m512 z = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, neg_one, _CMP_LT_OQ), x, neg_one);  // NaN stays
  z = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(z, one, _CMP_GT_OQ), z, one);
  const __m256 low = rational8(_mm512_castps512_ps256(z));
  const __m256 high = rational8(_mm512_extractf32x8_ps(z, 1));
  const __m512 r = _mm512_insertf32x8(_mm512_castps256_ps512(low), high, 1);
  const __m512 sign = _mm512_and_ps(x, _mm512_set1_ps(-0.0f));
  const __m512 unit = _mm512_or_ps(sign, _mm512_set1_ps(1.0f));  // copysign(1, x)
  const __m512 abs_x = _mm512_andnot_ps(_mm512_set1_ps(-0.0f), x);
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(abs_x, one, _CMP_GT_OQ), r, unit);
}

CBATCH_AVX512 inline __m512 geglu16(__m512 x, __m512 up) {
  const __m512 cube = _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(0.044715f), x), x);
  const __m512 inner = _mm512_fmadd_ps(cube, x, x);  // x + 0.044715 x^3
  const __m512 t = tanh16(_mm512_mul_ps(_mm512_set1_ps(0.7978845608028654f), inner));
  const __m512 gelu = _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(0.5f), x), _mm512_add_ps(_mm512_set1_ps(1.0f), t));
  return _mm512_mul_ps(gelu, up);
}

CBATCH_AVX512 void geglu_kernel(const float* gate, const float* up, float* out, int count) {
  int i = 0;
  for (; i + 16 <= count; i += 16) {
    _mm512_storeu_ps(out + i, geglu16(_mm512_loadu_ps(gate + i), _mm512_loadu_ps(up + i)));
  }
  if (i < count) {
    const auto mask = static_cast<__mmask16>((1u << (count - i)) - 1);
    const __m512 g = _mm512_maskz_loadu_ps(mask, gate + i), u = _mm512_maskz_loadu_ps(mask, up + i);
    _mm512_mask_storeu_ps(out + i, mask, geglu16(g, u));
  }
}

}  // namespace

bool can_geglu_avx512() {
  static const bool can = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
  }();
  return can;
}

void geglu_avx512(const float* gate, const float* up, float* out, int count) { geglu_kernel(gate, up, out, count); }

#else

bool can_geglu_avx512() { return false; }
void geglu_avx512(const float*, const float*, float*, int) {}

#endif

}  // namespace cbatch::gelu_detail
