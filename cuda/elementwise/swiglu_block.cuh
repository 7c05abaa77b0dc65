// The block code of the gated FFN activation (swiglu.cu, whose header describes it): one output element a
// call, in fp32. It uses no CUDA header of its own: include it after cuda_dtype.cuh and swiglu.hpp, or on
// the host after tests/cuda/block_emulator.hpp and then cuda_dtype.cuh (tests/cuda/test_moe_emulated.cpp).
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>

namespace cbatch::swiglu_detail {

// 0.5 a (1 + tanh(sqrt(2 / pi) (a + 0.044715 a^3))), as engine/cpu/cpu_ops.cpp's gelu_tanh.
__device__ __forceinline__ float gelu_tanh(float a) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  return 0.5f * a * (1.0f + tanhf(kSqrt2OverPi * (a + 0.044715f * a * a * a)));
}

// relu(a)^2: a plain FFN's activation (Nemotron-H), as engine/cpu/cpu_ops.cpp's plain_ffn_row.
__device__ __forceinline__ float relu_squared_f(float a) {
  const float r = fmaxf(a, 0.0f);
  return r * r;
}

// act(gate) * up of the activation ACT; gpt-oss's clamped SwiGLU clamps gate above at limit and up to
// [-limit, limit], then (up + 1) * gate * sigmoid(alpha * gate).
template <Activation ACT>
__device__ __forceinline__ float gated(float gate, float up, const GatedParams& p) {
  if constexpr (ACT == Activation::kGeluTanh) {
    return gelu_tanh(gate) * up;
  } else if constexpr (ACT == Activation::kSwigluClamped) {
    gate = fminf(gate, p.limit);
    up = fminf(fmaxf(up, -p.limit), p.limit);
    return (up + 1.0f) * gate / (1.0f + expf(-p.alpha * gate));
  } else {
    return gate / (1.0f + expf(-gate)) * up;
  }
}

// Output i of (num_rows, hidden): row i / hidden reads its gate|up row, adds its expert's biases if any.
template <typename T, Activation ACT>
__device__ __forceinline__ void swiglu_element(T* __restrict__ out,            // (num_rows, hidden)
                                               const T* __restrict__ gate_up,  // (num_rows, 2 * hidden)
                                               size_t i, int hidden, const GatedParams& p) {
  const size_t row = i / hidden;
  const size_t col = i % hidden;
  const T* src = gate_up + row * 2 * hidden;
  float gate = to_float(src[col]);
  float up = to_float(src[hidden + col]);
  if (p.bias != nullptr) {
    const float* b = p.bias + static_cast<size_t>(p.row_expert[row]) * 2 * hidden;
    gate += b[col];
    up += b[hidden + col];
  }
  out[i] = from_float<T>(gated<ACT>(gate, up, p));
}

}  // namespace cbatch::swiglu_detail
