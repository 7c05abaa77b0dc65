// The gated FFN activation over the fused gate|up GEMM output: out = act(gate) * up, computed in fp32,
// act = silu (SwiGLU), tanh-GELU (GeGLU) or gpt-oss's clamped SwiGLU, one build per activation; the
// experts' gate|up biases, when given, are added per row first. A grid-stride loop over the
// num_rows * hidden outputs (any hidden size, no alignment assumed). The block code is in swiglu_block.cuh.
// Layouts: gate_up (num_rows, 2 * hidden) with gate in columns [0, hidden); out (num_rows, hidden).
#include "cuda/elementwise/swiglu.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <string>

#include "cuda/common/cuda_check.hpp"
#include "cuda/common/cuda_dtype.cuh"
#include "cuda/elementwise/swiglu_block.cuh"

namespace cbatch {

using namespace swiglu_detail;

template <typename T, Activation ACT>
__global__ void swiglu_kernel(T* __restrict__ out,              // (num_rows, hidden)
                              const T* __restrict__ gate_up,    // (num_rows, 2 * hidden)
                              size_t num_outputs, int hidden, GatedParams params) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < num_outputs; i += stride) {
    swiglu_element<T, ACT>(out, gate_up, i, hidden, params);
  }
}

template <typename T>
void swiglu(T* d_out, const T* d_gate_up, int num_rows, int hidden, cudaStream_t stream, Activation activation,
            const GatedParams& params) {
  if (num_rows < 0 || hidden <= 0) {
    throw Error("swiglu: bad sizes num_rows=" + std::to_string(num_rows) + " hidden=" + std::to_string(hidden));
  }
  if (params.bias != nullptr && params.row_expert == nullptr) throw Error("swiglu: expert biases without row experts");
  if (num_rows == 0) return;
  const size_t num_outputs = static_cast<size_t>(num_rows) * hidden;
  constexpr int kThreads = 256;
  const unsigned blocks = static_cast<unsigned>(std::min<size_t>((num_outputs + kThreads - 1) / kThreads, 65536));
  switch (activation) {
    case Activation::kSilu:
      swiglu_kernel<T, Activation::kSilu><<<blocks, kThreads, 0, stream>>>(d_out, d_gate_up, num_outputs, hidden,
                                                                          params);
      break;
    case Activation::kGeluTanh:
      swiglu_kernel<T, Activation::kGeluTanh><<<blocks, kThreads, 0, stream>>>(d_out, d_gate_up, num_outputs, hidden,
                                                                              params);
      break;
    case Activation::kSwigluClamped:
      swiglu_kernel<T, Activation::kSwigluClamped><<<blocks, kThreads, 0, stream>>>(d_out, d_gate_up, num_outputs,
                                                                                   hidden, params);
      break;
    default: throw Error("swiglu: unknown activation " + std::to_string(static_cast<int>(activation)));
  }
  CUDA_CHECK_LAUNCH();
}

template <typename T>
__global__ void relu_squared_kernel(T* out, const T* in, size_t n) {  // out, in (n); out may be in
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    out[i] = from_float<T>(relu_squared_f(to_float(in[i])));
  }
}

template <typename T>
void relu_squared(T* d_out, const T* d_in, size_t n, cudaStream_t stream) {
  if (n == 0) return;
  constexpr int kThreads = 256;
  const unsigned blocks = static_cast<unsigned>(std::min<size_t>((n + kThreads - 1) / kThreads, 65536));
  relu_squared_kernel<T><<<blocks, kThreads, 0, stream>>>(d_out, d_in, n);
  CUDA_CHECK_LAUNCH();
}

template void relu_squared<float>(float*, const float*, size_t, cudaStream_t);
template void relu_squared<__nv_bfloat16>(__nv_bfloat16*, const __nv_bfloat16*, size_t, cudaStream_t);
template void relu_squared<__half>(__half*, const __half*, size_t, cudaStream_t);

template void swiglu<float>(float*, const float*, int, int, cudaStream_t, Activation, const GatedParams&);
template void swiglu<__nv_bfloat16>(__nv_bfloat16*, const __nv_bfloat16*, int, int, cudaStream_t, Activation,
                                    const GatedParams&);
template void swiglu<__half>(__half*, const __half*, int, int, cudaStream_t, Activation, const GatedParams&);

}  // namespace cbatch
