// Host launchers of Gemma 4's per-layer inputs and layer tail (per_layer_input.cu), transformers'
// get_per_layer_inputs / project_per_layer_inputs and the end of Gemma4TextDecoderLayer, as the CPU's
// cpu_per_layer_input.cpp computes them.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "engine/model/model_config.hpp"

namespace cbatch {

// Each row's inputs of every layer: for row r and layer l, with v = proj[r, l p .. l p + p) / sqrt(dim),
// out[r, l p + i] = (v_i / sqrt(mean(v^2) + eps) * norm[i] + table[tokens[r], l p + i] * sqrt(p)) / sqrt(2).
//   out, proj (num_rows, num_layers * p) fp32 (proj: the per-layer model projection of the scaled embedding;
//   out may be proj)
//   table (vocab, num_layers * p) T; tokens (num_rows); norm (p) fp32
template <typename T>
void per_layer_inputs(float* d_out, const float* d_proj, const T* d_table, const int32_t* d_tokens,
                      const float* d_norm, int num_rows, int num_layers, int p, int dim, float eps,
                      cudaStream_t stream);

// Layer `layer`'s gate, in place: gate[r, i] = act(gate[r, i]) * inputs[r, layer p + i], act the family's
// activation (the tanh GELU, or silu). gate (num_rows, p) T: the per-layer gate's GEMM output; inputs
// (num_rows, num_layers * p) fp32 from per_layer_inputs.
template <typename T>
void per_layer_gate(T* d_gate, const float* d_inputs, int layer, int num_rows, int num_layers, int p,
                    Activation activation, cudaStream_t stream);

// The end of a layer that adds its own sublayer output: x[r] = (x[r] + rmsnorm(delta[r]) * delta_norm) *
// scale[0], in fp32; delta skipped when null (then delta_norm unused), the scale when null; out[r] = x[r]
// in T when out is given (a GEMM's input). x (num_rows, dim) fp32, delta and out (num_rows, dim) T,
// delta_norm (dim) fp32, scale (1) fp32 on the device.
template <typename T>
void residual_tail(float* d_x, const T* d_delta, const float* d_delta_norm, const float* d_scale, T* d_out,
                   int num_rows, int dim, float eps, cudaStream_t stream);

}  // namespace cbatch
