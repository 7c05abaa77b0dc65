// Host launchers of the FFN activations (swiglu.cu): SwiGLU, GeGLU, or gpt-oss's clamped SwiGLU, with
// per-expert gate|up biases for the experts' permuted rows; relu^2 of a plain FFN.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "engine/model/model_config.hpp"

namespace cbatch {

// What the activation takes beside gate|up: kSwigluClamped's limit and alpha, and the biases of the
// experts' gate|up products (bias row row_expert[r] added to row r before the activation).
struct GatedParams {
  float limit = 0.0f;                   // kSwigluClamped only
  float alpha = 1.0f;                   // kSwigluClamped only
  const float* bias = nullptr;          // (num_experts, 2 * hidden) fp32 [gate | up], or null
  const int32_t* row_expert = nullptr;  // (num_rows) each row's expert; with bias only
};

// out[r, c] = act(gate_up[r, c]) * gate_up[r, hidden + c] in fp32, act the family's activation: silu(a) =
// a / (1 + exp(-a)) (SwiGLU), the tanh approximation of GELU (GeGLU: gelu_tanh of engine/cpu/cpu_ops), or
// the clamped SwiGLU (swiglu_block.cuh). gate_up (num_rows, 2 * hidden) T: the fused [w_gate; w_up] GEMM
// output; out (num_rows, hidden) T.
template <typename T>
void swiglu(T* d_out, const T* d_gate_up, int num_rows, int hidden, cudaStream_t stream,
            Activation activation = Activation::kSilu, const GatedParams& params = {});

// out[i] = relu(in[i])^2 for i < n: the activation of a plain FFN without biases (Nemotron-H's relu^2 MLP),
// in (n) T the up GEMM's output, out (n) T (may be in).
template <typename T>
void relu_squared(T* d_out, const T* d_in, size_t n, cudaStream_t stream);

}  // namespace cbatch
