// Internal to cpu_ops.cpp: the constants of exp_fp32 and tanh_fp32, and the gated activations (GeGLU and
// SwiGLU) with AVX-512, chosen at run time. Both functions go through e^t = 2^k (expm1(r) + 1) for
// t = k ln2 + r, |r| <= ln2 / 2, in double, expm1(r) by its Taylor series to r^13 / 13! (the next term is
// below 1e-17 of it):
// - exp_fp32: 2^k expm1(r) + 2^k as one fused multiply-add, t clamped to [-104, 89] (outside, e^t rounds
//   to 0 or overflows in fp32 anyway), then rounded to fp32.
// - tanh_fp32: tanh x = expm1(2|x|) / (expm1(2|x|) + 2) with the sign of x, expm1(t) = 2^k expm1(r) +
//   (2^k - 1) as one fused multiply-add (2^k - 1 is exact), so there is no cancellation; |x| is capped at
//   10, where tanh already rounds to 1 in fp32.
// Each element of geglu_avx512 gets gelu_tanh's bits and each of swiglu_avx512 the scalar SwiGLU's: the same
// operations (fused multiply-adds, one division, roundings to fp32 at the same places), 16 at a time, a
// masked block for the last few. libm's tanhf and expf, one call per element, took about 15% of a Gemma 3
// decode step and 5% of a 64-sequence step of a 1.7B Llama.
#pragma once
#include <array>
#include <cstddef>

namespace cbatch::glu_detail {

inline constexpr float kTanhCap = 10.0f;
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

bool can_glu_avx512();
// out[i] = gelu_tanh(gate[i]) * up[i] for i < count. Caller checks can_glu_avx512 first.
void geglu_avx512(const float* gate, const float* up, float* out, int count);
// out[i] = gate[i] / (1 + exp_fp32(-gate[i])) * up[i] for i < count. Caller checks can_glu_avx512 first.
void swiglu_avx512(const float* gate, const float* up, float* out, int count);

}  // namespace cbatch::glu_detail
