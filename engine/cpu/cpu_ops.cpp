// The CPU backend's row operations (cpu_ops.hpp): RMSNorm and LayerNorm, the FFN activations (SwiGLU,
// GeGLU, clamped SwiGLU, plain GELU and SiLU; the gated ones with AVX-512 where the CPU has it,
// cpu_glu_avx512.cpp, the same bits), exp_fp32 and tanh_fp32 (cpu_exp.hpp's arithmetic), softcapping and
// the greedy argmax.
#include "engine/cpu/cpu_ops.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "engine/base/error.hpp"
#include "engine/cpu/cpu_exp.hpp"
#include "engine/cpu/cpu_glu_avx512.hpp"

namespace cbatch {

void rmsnorm_row(const float* x, const float* weight, float* out, int dim, float eps) {
  float sum_sq = 0.0f;
  for (int i = 0; i < dim; ++i) sum_sq += x[i] * x[i];
  const float scale = 1.0f / std::sqrt(sum_sq / static_cast<float>(dim) + eps);
  if (weight == nullptr) {
    for (int i = 0; i < dim; ++i) out[i] = x[i] * scale;
  } else {
    for (int i = 0; i < dim; ++i) out[i] = x[i] * scale * weight[i];
  }
}

void layernorm_row(const float* x, const float* weight, const float* bias, float* out, int dim, float eps) {
  float sum = 0.0f;
  for (int i = 0; i < dim; ++i) sum += x[i];
  const float mean = sum / static_cast<float>(dim);
  float sum_sq = 0.0f;
  for (int i = 0; i < dim; ++i) sum_sq += (x[i] - mean) * (x[i] - mean);
  const float scale = 1.0f / std::sqrt(sum_sq / static_cast<float>(dim) + eps);
  for (int i = 0; i < dim; ++i) out[i] = (x[i] - mean) * scale * weight[i] + bias[i];
}

namespace {

using exp_detail::exp_fp32_inline;
using exp_detail::exp_parts;

// tanh_fp32 and gelu_tanh, inline for the loops over them (cpu_glu_avx512.cpp repeats them on 16 lanes).

inline float tanh_fp32_inline(float x) {
  using namespace glu_detail;
  const float abs_x = std::fabs(x);
  const double a = abs_x < kTanhCap ? abs_x : kTanhCap;  // NaN too becomes the cap (its result is replaced)
  double s, rq;
  exp_parts(2.0 * a, s, rq);
  const double e = std::fma(s, rq, s - 1.0);  // expm1(2a) = 2^k expm1(r) + 2^k - 1, one rounding
  const auto y = static_cast<float>(e / (e + 2.0));
  return std::isnan(x) ? x : std::copysign(y, x);
}

inline float gelu_tanh_inline(float x) {
  const float kSqrt2OverPi = 0.7978845608028654f;
  const float inner = std::fma(0.044715f * x * x, x, x);  // x + 0.044715 x^3
  return 0.5f * x * (1.0f + tanh_fp32_inline(kSqrt2OverPi * inner));
}

}  // namespace

float exp_fp32(float x) { return exp_fp32_inline(x); }
float tanh_fp32(float x) { return tanh_fp32_inline(x); }
float gelu_tanh(float x) { return gelu_tanh_inline(x); }

// erf(x) as x P(x^2) / Q(x^2) on [-4, 4] (outside, erf is +-1 in fp32): a rational fit of this project's
// (least squares reweighted towards the largest error, on 6,000 points of [0, 4]); at most 3.4e-7 from
// erf in fp32, a few units in the last place. Branch-free, so loops over it vectorize (libm's erff does
// not, and took 12% of an encoder's time).
inline float erf_rational(float x) {
  x = std::clamp(x, -4.0f, 4.0f);
  const float z = x * x;
  float p = -1.370939995e-08f;
  for (float c : {4.788970742e-06f, 3.829920641e-04f, 3.839808595e-03f, 5.433773028e-02f, 1.846946406e-01f,
                  1.128379183e+00f}) {
    p = p * z + c;
  }
  float q = 6.408891947e-05f;
  for (float c : {1.310036142e-03f, 1.545515348e-02f, 1.138261990e-01f, 4.970149149e-01f, 1.0f}) q = q * z + c;
  return x * p / q;
}

float gelu_erf(float x) { return 0.5f * x * (1.0f + erf_rational(x * 0.7071067811865476f)); }

void plain_ffn_row(const float* up, const float* bias, float* out, int hidden, Activation activation) {
  if (bias == nullptr) {  // no bias (Nemotron-H's relu^2 MLP)
    if (activation != Activation::kRelu2) throw Error("internal error: a plain FFN without a bias must be relu^2");
    for (int i = 0; i < hidden; ++i) {
      const float r = std::max(up[i], 0.0f);
      out[i] = r * r;
    }
    return;
  }
  if (activation == Activation::kGeluErf) {  // a loop of its own: it vectorizes
    for (int i = 0; i < hidden; ++i) out[i] = gelu_erf(up[i] + bias[i]);
    return;
  }
  for (int i = 0; i < hidden; ++i) {
    const float u = up[i] + bias[i];
    out[i] = activation == Activation::kGeluTanh ? gelu_tanh(u) : u / (1.0f + exp_fp32_inline(-u));
  }
}

void gated_ffn_cols(const float* gate, const float* up, float* out, int count, const GluParams& glu) {
  if (glu.kind == Activation::kGeluTanh) {
    if (glu_detail::can_glu_avx512()) return glu_detail::geglu_avx512(gate, up, out, count);
    for (int i = 0; i < count; ++i) out[i] = gelu_tanh_inline(gate[i]) * up[i];
    return;
  }
  if (glu.kind == Activation::kGeluErf) {
    for (int i = 0; i < count; ++i) out[i] = gelu_erf(gate[i]) * up[i];
    return;
  }
  if (glu.kind == Activation::kSwigluClamped) {
    for (int i = 0; i < count; ++i) {
      const float g = std::min(gate[i], glu.limit);
      const float u = std::clamp(up[i], -glu.limit, glu.limit);
      out[i] = (u + 1.0f) * (g / (1.0f + exp_fp32_inline(-glu.alpha * g)));
    }
    return;
  }
  if (glu_detail::can_glu_avx512()) return glu_detail::swiglu_avx512(gate, up, out, count);
  for (int i = 0; i < count; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + exp_fp32_inline(-g)) * up[i];
  }
}

void gated_ffn_row(const float* gate_up, float* out, int hidden, const GluParams& glu) {
  gated_ffn_cols(gate_up, gate_up + hidden, out, hidden, glu);
}

int32_t first_argmax(const float* values, int n) {
  constexpr int kLanes = 16;
  if (n <= 0 || std::isnan(values[0])) return 0;
  float lane_max[kLanes];  // lane j: the largest of values[j], values[j + 16], ... (NaNs skipped)
  std::fill_n(lane_max, kLanes, -INFINITY);
  const int whole = n / kLanes * kLanes;
  for (int i = 0; i < whole; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) lane_max[j] = values[i + j] > lane_max[j] ? values[i + j] : lane_max[j];
  }
  float best = values[0];  // not NaN: the answer's value is at least this
  for (float m : lane_max) best = m > best ? m : best;
  for (int i = whole; i < n; ++i) best = values[i] > best ? values[i] : best;
  for (int i = 0; i < whole; i += kLanes) {  // the first block holding best (0 and -0 are equal, as in argmax_row)
    bool found = false;
    for (int j = 0; j < kLanes; ++j) found |= values[i + j] == best;
    if (!found) continue;
    for (int j = 0; j < kLanes; ++j)
      if (values[i + j] == best) return i + j;
  }
  for (int i = whole; i < n; ++i)
    if (values[i] == best) return i;
  return 0;  // not reached: best is one of the values
}

void softcap_row(float* values, int n, float cap) {
  for (int i = 0; i < n; ++i) values[i] = cap * std::tanh(values[i] / cap);
}

}  // namespace cbatch
