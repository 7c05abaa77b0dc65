// The block code of Gemma 4's per-layer inputs and layer tail (per_layer_input.cu, whose header describes
// them): one block of kPerLayerThreads threads a row, fp32 throughout. It uses no CUDA header of its own:
// include it after cuda_dtype.cuh (to_float, from_float, block_sum) and swiglu_block.cuh (gelu_tanh), or on
// the host after tests/cuda/block_emulator.hpp and then those (tests/cuda/test_per_layer_input_emulated.cpp).
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "engine/model/model_config.hpp"

namespace cbatch::per_layer_detail {

constexpr int kPerLayerThreads = 256;

// The per-layer activation: Gemma 4's hidden_activation (the tanh GELU), or silu.
__device__ __forceinline__ float per_layer_act(float a, Activation activation) {
  if (activation == Activation::kGeluTanh) return swiglu_detail::gelu_tanh(a);
  return a / (1.0f + expf(-a));
}

// Row blockIdx.x of out (rows, num_layers * p): for each layer l, with v = proj[l p .. l p + p) * dim_scale,
// out = (v / sqrt(mean(v^2) + eps) * norm + table[token] * table_scale) * input_scale. out may be proj (each
// element is read by the thread that writes it, before it writes it).
template <typename T>
__device__ __forceinline__ void per_layer_inputs_block(float* out,         // (rows, L p), may be proj
                                                       const float* proj,  // (rows, L p)
                                                       const T* __restrict__ table,     // (vocab, L p)
                                                       const int32_t* __restrict__ tokens,  // (rows)
                                                       const float* __restrict__ norm,  // (p)
                                                       int num_layers, int p, float eps, float dim_scale,
                                                       float table_scale, float input_scale) {
  const size_t all = static_cast<size_t>(num_layers) * p;
  const size_t row = blockIdx.x;
  const float* in = proj + row * all;
  const T* tok = table + static_cast<size_t>(tokens[row]) * all;
  float* o = out + row * all;
  for (int l = 0; l < num_layers; ++l) {
    const size_t at = static_cast<size_t>(l) * p;
    float sum_sq = 0.0f;
    for (int i = threadIdx.x; i < p; i += blockDim.x) {
      const float v = in[at + i] * dim_scale;
      sum_sq += v * v;
    }
    const float inv_rms = 1.0f / sqrtf(block_sum(sum_sq) / static_cast<float>(p) + eps);
    for (int i = threadIdx.x; i < p; i += blockDim.x) {
      const float v = in[at + i] * dim_scale * inv_rms * norm[i];
      o[at + i] = (v + to_float(tok[at + i]) * table_scale) * input_scale;
    }
    __syncthreads();  // block_sum's shared partials are reused by the next layer
  }
}

// Element i of gate (rows, p), in place: act(gate) * inputs[row, layer p + col].
template <typename T>
__device__ __forceinline__ void per_layer_gate_element(T* __restrict__ gate,            // (rows, p)
                                                       const float* __restrict__ inputs,  // (rows, L p)
                                                       size_t i, int layer, int num_layers, int p,
                                                       Activation activation) {
  const size_t row = i / p, col = i % p;
  const float in = inputs[row * num_layers * p + static_cast<size_t>(layer) * p + col];
  gate[i] = from_float<T>(per_layer_act(to_float(gate[i]), activation) * in);
}

// Row blockIdx.x: x = (x + rmsnorm(delta) * delta_norm) * scale[0] (delta skipped when null, the scale when
// null), and out = x in T when out is given.
template <typename T>
__device__ __forceinline__ void residual_tail_block(float* __restrict__ x,                // (rows, dim)
                                                    const T* __restrict__ delta,          // (rows, dim) or null
                                                    const float* __restrict__ delta_norm,  // (dim), with delta
                                                    const float* __restrict__ scale,      // (1) or null
                                                    T* __restrict__ out,                  // (rows, dim) or null
                                                    int dim, float eps) {
  const size_t row = blockIdx.x;
  float* xr = x + row * dim;
  float inv_rms = 1.0f;
  if (delta != nullptr) {
    const T* dr = delta + row * dim;
    float sum_sq = 0.0f;
    for (int i = threadIdx.x; i < dim; i += blockDim.x) {
      const float d = to_float(dr[i]);
      sum_sq += d * d;
    }
    inv_rms = 1.0f / sqrtf(block_sum(sum_sq) / static_cast<float>(dim) + eps);
  }
  const float s = scale != nullptr ? scale[0] : 1.0f;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) {
    float v = xr[i];
    if (delta != nullptr) v += to_float(delta[row * dim + i]) * inv_rms * delta_norm[i];
    v *= s;
    xr[i] = v;
    if (out != nullptr) out[row * dim + i] = from_float<T>(v);
  }
}

}  // namespace cbatch::per_layer_detail
