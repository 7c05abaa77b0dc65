// Gemma 4's per-layer inputs and layer tail (per_layer_input.hpp). per_layer_inputs: one block of 256
// threads a row, a block reduction per layer for the norm of its slice of the projection, then the sum with
// the row's token's slice of the table. per_layer_gate: a thread an element. residual_tail: one block a row,
// a reduction for the delta's norm, then x updated (and copied to T for the next GEMM). All fp32 before the
// one rounding of a T output. The block code is in per_layer_input_block.cuh.
#include "cuda/elementwise/per_layer_input.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <string>

#include "cuda/common/cuda_check.hpp"
#include "cuda/common/cuda_dtype.cuh"
#include "cuda/elementwise/swiglu.hpp"
#include "cuda/elementwise/swiglu_block.cuh"
#include "cuda/elementwise/per_layer_input_block.cuh"

namespace cbatch {

using namespace per_layer_detail;

template <typename T>
__global__ void __launch_bounds__(kPerLayerThreads)
    per_layer_inputs_kernel(float* out, const float* proj, const T* __restrict__ table,
                            const int32_t* __restrict__ tokens, const float* __restrict__ norm, int num_layers,
                            int p, float eps, float dim_scale, float table_scale, float input_scale) {
  per_layer_inputs_block<T>(out, proj, table, tokens, norm, num_layers, p, eps, dim_scale, table_scale, input_scale);
}

template <typename T>
__global__ void per_layer_gate_kernel(T* __restrict__ gate, const float* __restrict__ inputs, size_t n, int layer,
                                      int num_layers, int p, Activation activation) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) per_layer_gate_element<T>(gate, inputs, i, layer, num_layers, p, activation);
}

template <typename T>
__global__ void __launch_bounds__(kPerLayerThreads)
    residual_tail_kernel(float* __restrict__ x, const T* __restrict__ delta, const float* __restrict__ delta_norm,
                         const float* __restrict__ scale, T* __restrict__ out, int dim, float eps) {
  residual_tail_block<T>(x, delta, delta_norm, scale, out, dim, eps);
}

template <typename T>
void per_layer_inputs(float* d_out, const float* d_proj, const T* d_table, const int32_t* d_tokens,
                      const float* d_norm, int num_rows, int num_layers, int p, int dim, float eps,
                      cudaStream_t stream) {
  if (num_rows < 0 || num_layers <= 0 || p <= 0 || dim <= 0) {
    throw Error("per_layer_inputs: bad sizes num_rows=" + std::to_string(num_rows) + " num_layers=" +
                std::to_string(num_layers) + " p=" + std::to_string(p) + " dim=" + std::to_string(dim));
  }
  if (num_rows == 0) return;
  per_layer_inputs_kernel<T><<<num_rows, kPerLayerThreads, 0, stream>>>(
      d_out, d_proj, d_table, d_tokens, d_norm, num_layers, p, eps, 1.0f / std::sqrt(static_cast<float>(dim)),
      std::sqrt(static_cast<float>(p)), 1.0f / std::sqrt(2.0f));
  CUDA_CHECK_LAUNCH();
}

template <typename T>
void per_layer_gate(T* d_gate, const float* d_inputs, int layer, int num_rows, int num_layers, int p,
                    Activation activation, cudaStream_t stream) {
  if (num_rows < 0 || p <= 0 || layer < 0 || layer >= num_layers) {
    throw Error("per_layer_gate: bad sizes num_rows=" + std::to_string(num_rows) + " layer=" + std::to_string(layer) +
                " num_layers=" + std::to_string(num_layers) + " p=" + std::to_string(p));
  }
  const size_t n = static_cast<size_t>(num_rows) * p;
  if (n == 0) return;
  constexpr int kThreads = 256;
  per_layer_gate_kernel<T><<<static_cast<unsigned>((n + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
      d_gate, d_inputs, n, layer, num_layers, p, activation);
  CUDA_CHECK_LAUNCH();
}

template <typename T>
void residual_tail(float* d_x, const T* d_delta, const float* d_delta_norm, const float* d_scale, T* d_out,
                   int num_rows, int dim, float eps, cudaStream_t stream) {
  if (num_rows < 0 || dim <= 0) {
    throw Error("residual_tail: bad sizes num_rows=" + std::to_string(num_rows) + " dim=" + std::to_string(dim));
  }
  if (d_delta != nullptr && d_delta_norm == nullptr) throw Error("residual_tail: a delta without its norm weight");
  if (num_rows == 0) return;
  residual_tail_kernel<T><<<num_rows, kPerLayerThreads, 0, stream>>>(d_x, d_delta, d_delta_norm, d_scale, d_out, dim,
                                                                     eps);
  CUDA_CHECK_LAUNCH();
}

#define CBATCH_INSTANTIATE_PER_LAYER(T)                                                                       \
  template void per_layer_inputs<T>(float*, const float*, const T*, const int32_t*, const float*, int, int, int, \
                                    int, float, cudaStream_t);                                                \
  template void per_layer_gate<T>(T*, const float*, int, int, int, int, Activation, cudaStream_t);            \
  template void residual_tail<T>(float*, const T*, const float*, const float*, T*, int, int, float, cudaStream_t);
CBATCH_INSTANTIATE_PER_LAYER(float)
CBATCH_INSTANTIATE_PER_LAYER(__nv_bfloat16)
CBATCH_INSTANTIATE_PER_LAYER(__half)
#undef CBATCH_INSTANTIATE_PER_LAYER

}  // namespace cbatch
