// Internal to cpu_ops.cpp: the gated activations (GeGLU and SwiGLU) with AVX-512, chosen at run time, and
// tanh_fp32's cap. tanh_fp32 goes through cpu_exp.hpp's expm1: tanh x = expm1(2|x|) / (expm1(2|x|) + 2)
// with the sign of x, expm1(t) = 2^k expm1(r) + (2^k - 1) as one fused multiply-add (2^k - 1 is exact),
// so there is no cancellation; |x| is capped at 10, where tanh already rounds to 1 in fp32.
// Each element of geglu_avx512 gets gelu_tanh's bits and each of swiglu_avx512 the scalar SwiGLU's: the same
// operations (fused multiply-adds, one division, roundings to fp32 at the same places), 16 at a time, a
// masked block for the last few. libm's tanhf and expf, one call per element, took about 15% of a Gemma 3
// decode step and 5% of a 64-sequence step of a 1.7B Llama.
#pragma once

namespace cbatch::glu_detail {

inline constexpr float kTanhCap = 10.0f;

bool can_glu_avx512();
// out[i] = gelu_tanh(gate[i]) * up[i] for i < count. Caller checks can_glu_avx512 first.
void geglu_avx512(const float* gate, const float* up, float* out, int count);
// out[i] = gate[i] / (1 + exp_fp32(-gate[i])) * up[i] for i < count. Caller checks can_glu_avx512 first.
void swiglu_avx512(const float* gate, const float* up, float* out, int count);

}  // namespace cbatch::glu_detail
