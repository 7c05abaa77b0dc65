// The attention output gate's two elementwise kernels (output_gate.hpp): a thread per output value.
#include "cuda/attention/output_gate.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>

#include "cuda/common/cuda_check.hpp"
#include "cuda/common/cuda_dtype.cuh"

namespace cbatch {
namespace {

constexpr int kThreads = 256;

template <typename T>
__global__ void split_kernel(T* __restrict__ qkv, T* __restrict__ gate, const T* __restrict__ gated, int num_heads,
                             int head_dim, int kv_dim) {
  const int64_t row = blockIdx.y;
  const int q_dim = num_heads * head_dim, out_width = q_dim + 2 * kv_dim;
  const T* src = gated + row * (2 * q_dim + 2 * kv_dim);
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < out_width; i += gridDim.x * blockDim.x) {
    if (i < q_dim) {
      const int h = i / head_dim, d = i % head_dim;
      qkv[row * out_width + i] = src[2 * h * head_dim + d];
      gate[row * q_dim + i] = src[(2 * h + 1) * head_dim + d];
    } else {
      qkv[row * out_width + i] = src[q_dim + i];  // k and v follow the 2 q_dim gated q rows
    }
  }
}

template <typename T>
__global__ void gate_kernel(T* __restrict__ attn, const T* __restrict__ gate, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float g = to_float(gate[i]);
    attn[i] = from_float<T>(to_float(attn[i]) / (1.0f + expf(-g)));
  }
}

}  // namespace

template <typename T>
void split_output_gate(T* d_qkv, T* d_gate, const T* d_gated, int num_rows, int num_heads, int head_dim, int kv_dim,
                       cudaStream_t stream) {
  if (num_rows == 0) return;
  const int width = num_heads * head_dim + 2 * kv_dim;
  const dim3 grid((width + kThreads - 1) / kThreads, num_rows);
  split_kernel<T><<<grid, kThreads, 0, stream>>>(d_qkv, d_gate, d_gated, num_heads, head_dim, kv_dim);
  CUDA_CHECK_LAUNCH();
}

template <typename T>
void apply_output_gate(T* d_attn, const T* d_gate, int num_rows, int q_dim, cudaStream_t stream) {
  const int64_t n = static_cast<int64_t>(num_rows) * q_dim;
  if (n == 0) return;
  const int blocks = static_cast<int>(std::min<int64_t>((n + kThreads - 1) / kThreads, 65535));
  gate_kernel<T><<<blocks, kThreads, 0, stream>>>(d_attn, d_gate, n);
  CUDA_CHECK_LAUNCH();
}

#define CBATCH_INSTANTIATE_OUTPUT_GATE(T)                                                         \
  template void split_output_gate<T>(T*, T*, const T*, int, int, int, int, cudaStream_t);          \
  template void apply_output_gate<T>(T*, const T*, int, int, cudaStream_t);
CBATCH_INSTANTIATE_OUTPUT_GATE(float)
CBATCH_INSTANTIATE_OUTPUT_GATE(__nv_bfloat16)
CBATCH_INSTANTIATE_OUTPUT_GATE(__half)
#undef CBATCH_INSTANTIATE_OUTPUT_GATE

}  // namespace cbatch
