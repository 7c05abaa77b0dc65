// GeGLU and SwiGLU with AVX-512 (cpu_glu_avx512.hpp): gelu_tanh, tanh_fp32 and exp_fp32 of cpu_ops.cpp,
// operation for operation, on 16 lanes (tanh and exp in double, 8 lanes at a time: cpu_exp.hpp).
#include "engine/cpu/cpu_glu_avx512.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "engine/cpu/cpu_exp.hpp"

// GCC 12's false positive on the AVX-512 intrinsics' undefined pass-through operand (as in the int8 kernels).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace cbatch::glu_detail {

#if defined(__x86_64__)
namespace {

using namespace exp_detail;

#define CBATCH_AVX512 __attribute__((target("avx512f,avx512dq")))

// tanh |z| for 8 lanes of a = |z| capped (cpu_glu_avx512.hpp), as tanh_fp32_inline computes it.
CBATCH_AVX512 inline __m512d tanh_abs8(__m512d a) {
  __m512d s, rq;
  exp_parts8(_mm512_add_pd(a, a), s, rq);
  const __m512d e = _mm512_fmadd_pd(s, rq, _mm512_sub_pd(s, _mm512_set1_pd(1.0)));  // expm1(2a)
  return _mm512_div_pd(e, _mm512_add_pd(e, _mm512_set1_pd(2.0)));
}

CBATCH_AVX512 inline __m512 tanh16(__m512 x) {
  const __m512 sign = _mm512_and_ps(x, _mm512_set1_ps(-0.0f));
  const __m512 abs_x = _mm512_andnot_ps(_mm512_set1_ps(-0.0f), x);
  const __m512 a = _mm512_min_ps(abs_x, _mm512_set1_ps(kTanhCap));  // NaN: the cap (second operand)
  const __m256 low = _mm512_cvtpd_ps(tanh_abs8(_mm512_cvtps_pd(_mm512_castps512_ps256(a))));
  const __m256 high = _mm512_cvtpd_ps(tanh_abs8(_mm512_cvtps_pd(_mm512_extractf32x8_ps(a, 1))));
  const __m512 y = _mm512_or_ps(_mm512_insertf32x8(_mm512_castps256_ps512(low), high, 1), sign);  // copysign
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), y, x);
}

CBATCH_AVX512 inline __m512 geglu16(__m512 x, __m512 up) {
  const __m512 cube = _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(0.044715f), x), x);
  const __m512 inner = _mm512_fmadd_ps(cube, x, x);  // x + 0.044715 x^3
  const __m512 t = tanh16(_mm512_mul_ps(_mm512_set1_ps(0.7978845608028654f), inner));
  const __m512 gelu = _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(0.5f), x), _mm512_add_ps(_mm512_set1_ps(1.0f), t));
  return _mm512_mul_ps(gelu, up);
}

// g / (1 + e^-g) * up, in fp32 but for the exponential.
CBATCH_AVX512 inline __m512 swiglu16(__m512 g, __m512 up) {
  const __m512 e = exp16(_mm512_xor_ps(g, _mm512_set1_ps(-0.0f)));  // -g
  return _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(_mm512_set1_ps(1.0f), e)), up);
}

template <__m512 (*Glu)(__m512, __m512)>
CBATCH_AVX512 void glu_kernel(const float* gate, const float* up, float* out, int count) {
  int i = 0;
  for (; i + 16 <= count; i += 16) {
    _mm512_storeu_ps(out + i, Glu(_mm512_loadu_ps(gate + i), _mm512_loadu_ps(up + i)));
  }
  if (i < count) {
    const auto mask = static_cast<__mmask16>((1u << (count - i)) - 1);
    const __m512 g = _mm512_maskz_loadu_ps(mask, gate + i), u = _mm512_maskz_loadu_ps(mask, up + i);
    _mm512_mask_storeu_ps(out + i, mask, Glu(g, u));
  }
}

}  // namespace

bool can_glu_avx512() {
  static const bool can = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
  }();
  return can;
}

void geglu_avx512(const float* gate, const float* up, float* out, int count) {
  glu_kernel<geglu16>(gate, up, out, count);
}
void swiglu_avx512(const float* gate, const float* up, float* out, int count) {
  glu_kernel<swiglu16>(gate, up, out, count);
}

#else

bool can_glu_avx512() { return false; }
void geglu_avx512(const float*, const float*, float*, int) {}
void swiglu_avx512(const float*, const float*, float*, int) {}

#endif

}  // namespace cbatch::glu_detail
