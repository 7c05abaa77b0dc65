// The final-logit transforms: the logits of the sampling rows, after the lm_head GEMM and before argmax,
// the device sampler or the copy to the host, become cap * tanh(logit / cap) (the softcap) or logit /
// divisor (Granite's logits_scaling). Grid-stride loops.
#include "cuda/elementwise/softcap.hpp"

#include <algorithm>
#include <string>

#include "cuda/attention/attention_shape.hpp"
#include "cuda/common/cuda_check.hpp"

namespace cbatch {

__global__ void softcap_kernel(float* __restrict__ values, size_t n, float cap) {  // values (n)
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    values[i] = softcapped(values[i], cap);
  }
}

void softcap(float* d_values, size_t n, float cap, cudaStream_t stream) {
  if (!(cap > 0.0f)) throw Error("softcap: the cap must be positive, got " + std::to_string(cap));
  if (n == 0) return;
  constexpr int kThreads = 256;
  const unsigned blocks = static_cast<unsigned>(std::min<size_t>((n + kThreads - 1) / kThreads, 65536));
  softcap_kernel<<<blocks, kThreads, 0, stream>>>(d_values, n, cap);
  CUDA_CHECK_LAUNCH();
}

__global__ void divide_kernel(float* __restrict__ values, size_t n, float divisor) {  // values (n)
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    values[i] /= divisor;
  }
}

void divide_logits(float* d_values, size_t n, float divisor, cudaStream_t stream) {
  if (!(divisor > 0.0f)) throw Error("divide_logits: the divisor must be positive, got " + std::to_string(divisor));
  if (n == 0) return;
  constexpr int kThreads = 256;
  const unsigned blocks = static_cast<unsigned>(std::min<size_t>((n + kThreads - 1) / kThreads, 65536));
  divide_kernel<<<blocks, kThreads, 0, stream>>>(d_values, n, divisor);
  CUDA_CHECK_LAUNCH();
}

}  // namespace cbatch
