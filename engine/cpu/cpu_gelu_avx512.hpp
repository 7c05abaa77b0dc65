// Internal to cpu_ops.cpp: tanh_fp32's constants, and the tanh-GELU gated activation (GeGLU) with AVX-512,
// chosen at run time. tanh x = expm1(2|x|) / (expm1(2|x|) + 2) in double with the sign of x: expm1(t) =
// 2^k (expm1(r) + 1) - 1 for t = k ln2 + r, |r| <= ln2 / 2, expm1(r) by its Taylor series to r^13 / 13!
// (the next term is below 1e-17 of it), and 2^k expm1(r) + (2^k - 1) as one fused multiply-add (2^k - 1
// is exact), so there is no cancellation; |x| is capped at 10, where tanh already rounds to 1 in fp32.
// Each element of geglu_avx512 gets gelu_tanh's bits: the same operations (fused multiply-adds, one
// division, roundings to fp32 at the same places), 16 at a time, a masked block for the last few; libm's
// tanhf, one call per element, took about 15% of a Gemma 3 decode step.
#pragma once
#include <array>
#include <cstddef>

namespace cbatch::gelu_detail {

inline constexpr float kTanhCap = 10.0f;
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

bool can_geglu_avx512();
// out[i] = gelu_tanh(gate[i]) * up[i] for i < count. Caller checks can_geglu_avx512 first.
void geglu_avx512(const float* gate, const float* up, float* out, int count);

}  // namespace cbatch::gelu_detail
