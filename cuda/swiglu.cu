// The gated FFN activation over the fused gate|up GEMM output: out = act(gate) * up, computed in fp32,
// act = silu (SwiGLU) or tanh-GELU (GeGLU), one build per activation. A grid-stride loop over the
// num_rows * hidden outputs (any hidden size, no alignment assumed).
// Layouts: gate_up (num_rows, 2 * hidden) with gate in columns [0, hidden); out (num_rows, hidden).
#include "cuda/swiglu.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <string>

#include "cuda/cuda_check.hpp"
#include "cuda/cuda_dtype.cuh"

namespace cbatch {

// 0.5 a (1 + tanh(sqrt(2 / pi) (a + 0.044715 a^3))), as engine/cpu/cpu_ops.cpp's gelu_tanh.
__device__ __forceinline__ float gelu_tanh(float a) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  return 0.5f * a * (1.0f + tanhf(kSqrt2OverPi * (a + 0.044715f * a * a * a)));
}

template <typename T, Activation ACT>
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
    if constexpr (ACT == Activation::kGeluTanh) {
      out[i] = from_float<T>(gelu_tanh(gate) * up);
    } else {
      out[i] = from_float<T>(gate / (1.0f + expf(-gate)) * up);
    }
  }
}

template <typename T>
void swiglu(T* d_out, const T* d_gate_up, int num_rows, int hidden, cudaStream_t stream, Activation activation) {
  if (num_rows < 0 || hidden <= 0) {
    throw Error("swiglu: bad sizes num_rows=" + std::to_string(num_rows) + " hidden=" + std::to_string(hidden));
  }
  if (num_rows == 0) return;
  const size_t num_outputs = static_cast<size_t>(num_rows) * hidden;
  constexpr int kThreads = 256;
  const unsigned blocks = static_cast<unsigned>(std::min<size_t>((num_outputs + kThreads - 1) / kThreads, 65536));
  switch (activation) {
    case Activation::kSilu:
      swiglu_kernel<T, Activation::kSilu><<<blocks, kThreads, 0, stream>>>(d_out, d_gate_up, num_outputs, hidden);
      break;
    case Activation::kGeluTanh:
      swiglu_kernel<T, Activation::kGeluTanh><<<blocks, kThreads, 0, stream>>>(d_out, d_gate_up, num_outputs, hidden);
      break;
    default: throw Error("swiglu: unknown activation " + std::to_string(static_cast<int>(activation)));
  }
  CUDA_CHECK_LAUNCH();
}

template void swiglu<float>(float*, const float*, int, int, cudaStream_t, Activation);
template void swiglu<__nv_bfloat16>(__nv_bfloat16*, const __nv_bfloat16*, int, int, cudaStream_t, Activation);
template void swiglu<__half>(__half*, const __half*, int, int, cudaStream_t, Activation);

}  // namespace cbatch
