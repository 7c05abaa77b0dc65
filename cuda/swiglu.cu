// SwiGLU over the fused gate|up GEMM output: out = silu(gate) * up, computed in fp32. A grid-stride loop
// over the num_rows * hidden outputs (any hidden size, no alignment assumed).
// Layouts: gate_up (num_rows, 2 * hidden) with gate in columns [0, hidden); out (num_rows, hidden).
#include "cuda/swiglu.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <string>

#include "cuda/cuda_check.hpp"
#include "cuda/cuda_dtype.cuh"

namespace cbatch {

template <typename T>
__global__ void swiglu_kernel(T* __restrict__ out,              // (num_rows, hidden)
                              const T* __restrict__ gate_up,    // (num_rows, 2 * hidden)
                              size_t num_outputs, int hidden) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < num_outputs; i += stride) {
    const size_t row = i / hidden;
    const size_t col = i % hidden;
    const T* src = gate_up + row * 2 * hidden;
    const float gate = to_float(src[col]);
    const float up = to_float(src[hidden + col]);
    out[i] = from_float<T>(gate / (1.0f + expf(-gate)) * up);
  }
}

template <typename T>
void swiglu(T* d_out, const T* d_gate_up, int num_rows, int hidden, cudaStream_t stream) {
  if (num_rows < 0 || hidden <= 0) {
    throw Error("swiglu: bad sizes num_rows=" + std::to_string(num_rows) + " hidden=" + std::to_string(hidden));
  }
  if (num_rows == 0) return;
  const size_t num_outputs = static_cast<size_t>(num_rows) * hidden;
  constexpr int kThreads = 256;
  const size_t blocks = std::min<size_t>((num_outputs + kThreads - 1) / kThreads, 65536);
  swiglu_kernel<T><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(d_out, d_gate_up, num_outputs, hidden);
  CUDA_CHECK_LAUNCH();
}

template void swiglu<float>(float*, const float*, int, int, cudaStream_t);
template void swiglu<__nv_bfloat16>(__nv_bfloat16*, const __nv_bfloat16*, int, int, cudaStream_t);
template void swiglu<__half>(__half*, const __half*, int, int, cudaStream_t);

}  // namespace cbatch
