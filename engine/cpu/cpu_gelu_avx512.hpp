// Internal to cpu_ops.cpp: the tanh-GELU gated activation (GeGLU) with AVX-512, chosen at run time. Each
// element gets gelu_tanh's bits (cpu_ops.hpp: tanh_rational's double rational, the same operations as fused
// multiply-adds, selects and one rounding), 16 at a time, a masked block for the last few; libm's tanhf,
// one call per element, took about 15% of a Gemma 3 decode step.
#pragma once

namespace cbatch::gelu_detail {

bool can_geglu_avx512();
// out[i] = gelu_tanh(gate[i]) * up[i] for i < count. Caller checks can_geglu_avx512 first.
void geglu_avx512(const float* gate, const float* up, float* out, int count);

}  // namespace cbatch::gelu_detail
