// The CPU backend's row operations in fp32: normalization (RMSNorm, LayerNorm), the FFN activations and
// the exact-bits exp and tanh beneath them, Gemma 2's softcapping and the greedy argmax. Each one computes
// a row from that row's inputs only, in a fixed order, so results do not depend on batching. These are
// also the references the CUDA kernels are tested against. RoPE: cpu_rope.hpp; attention: cpu_attention.hpp.
#pragma once
#include <cstdint>

#include "engine/model/model_config.hpp"

namespace cbatch {

// out (dim) = x / sqrt(mean(x^2) + eps) * weight (weight nullptr: none; out may be x)
void rmsnorm_row(const float* x, const float* weight, float* out, int dim, float eps);
// out (dim) = (x - mean(x)) / sqrt(var(x) + eps) * weight + bias (LayerNorm; out may be x)
void layernorm_row(const float* x, const float* weight, const float* bias, float* out, int dim, float eps);


// The gated FFN's activation: SwiGLU, GeGLU, or the clamped SwiGLU with its limit and slope (gpt-oss).
struct GluParams {
  GluParams(Activation kind = Activation::kSilu, float limit = 0.0f, float alpha = 1.0f)  // NOLINT: implicit
      : kind(kind), limit(limit), alpha(alpha) {}
  Activation kind;
  float limit;  // kSwigluClamped: gate clamped above at limit, up to [-limit, limit]
  float alpha;  // kSwigluClamped: slope of the sigmoid
};
inline GluParams glu_params(const ModelConfig& c) { return {c.activation, c.swiglu_limit, c.swiglu_alpha}; }

// gate_up: (2 * hidden) = [gate | up]; out (hidden) = act(gate) * up, act silu (SwiGLU) or tanh-GELU (GeGLU);
// clamped SwiGLU: g = min(gate, limit), u = clamp(up, -limit, limit), out = (u + 1) * g * sigmoid(alpha * g).
void gated_ffn_row(const float* gate_up, float* out, int hidden, const GluParams& glu);
// The same, elementwise, on `count` columns of one row: out[i] = act(gate[i]) * up[i] (a row's columns can
// be split across threads, each element computed as gated_ffn_row computes it).
void gated_ffn_cols(const float* gate, const float* up, float* out, int count, const GluParams& glu);
float gelu_tanh(float x);  // 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))), tanh by tanh_fp32
// e^x rounded to fp32, the same bits on every C library and instruction set (cpu_exp.hpp: in double by
// range reduction and the Taylor series of expm1), within about 1e-16 of e^x before the rounding, so
// correctly rounded but where e^x lies that close to a midpoint of two floats; SiLU's and attention's
// exponential (libm's expf is not correctly rounded everywhere, nor the same on every C library).
float exp_fp32(float x);
// tanh x rounded to fp32, the same bits on every C library and instruction set (cpu_exp.hpp: expm1
// in double by range reduction and its Taylor series), within about 1e-16 of tanh before the rounding, so
// correctly rounded but where tanh x lies that close to a midpoint of two floats; no libm call, so loops
// over it vectorize (libm's tanhf does not).
float tanh_fp32(float x);
float gelu_erf(float x);   // 0.5 x (1 + erf(x / sqrt(2)))
// A plain (non-gated) FFN's activation: out (hidden) = act(up + bias), act GELU (erf or tanh) or silu; or,
// without a bias (nullptr), relu(up)^2.
void plain_ffn_row(const float* up, const float* bias, float* out, int hidden, Activation activation);

// argmax_row's answer (sampler.hpp: the first index of the largest value, NaNs never winning, 0 when
// values[0] is NaN) in two passes the compiler vectorizes: the largest value, then its first index.
int32_t first_argmax(const float* values, int n);

// values (n) become cap * tanh(values / cap): Gemma 2's softcapping of scores and logits.
void softcap_row(float* values, int n, float cap);

}  // namespace cbatch
