// Embedding gather: the residual stream x starts as the token's embedding row, widened to fp32 (and
// scaled, for the families that scale it: a build of its own, so Llama's gather has no multiply).
// One block per token row, threads stride over the row. Layout: table (vocab, dim), x (num_tokens, dim).
#include "cuda/elementwise/embedding.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cuda/common/cuda_check.hpp"
#include "cuda/common/cuda_dtype.cuh"

namespace cbatch {

template <typename T, bool SCALED>
__global__ void embedding_kernel(float* __restrict__ x,           // (num_tokens, dim)
                                 const T* __restrict__ table,     // (vocab, dim)
                                 const int32_t* __restrict__ tokens,  // (num_tokens)
                                 int dim, float scale) {
  const int row = blockIdx.x;
  const T* src = table + static_cast<size_t>(tokens[row]) * dim;
  float* dst = x + static_cast<size_t>(row) * dim;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) {
    if constexpr (SCALED) {
      dst[i] = to_float(src[i]) * scale;
    } else {
      dst[i] = to_float(src[i]);
    }
  }
}

template <typename T>
void embedding(float* d_x, const T* d_table, const int32_t* d_tokens, int num_tokens, int dim, cudaStream_t stream,
               float scale) {
  if (num_tokens < 0 || dim <= 0) {
    throw Error("embedding: bad sizes num_tokens=" + std::to_string(num_tokens) + " dim=" + std::to_string(dim));
  }
  if (num_tokens == 0) return;
  if (scale != 1.0f) {
    embedding_kernel<T, true><<<num_tokens, 256, 0, stream>>>(d_x, d_table, d_tokens, dim, scale);
  } else {
    embedding_kernel<T, false><<<num_tokens, 256, 0, stream>>>(d_x, d_table, d_tokens, dim, scale);
  }
  CUDA_CHECK_LAUNCH();
}

template void embedding<float>(float*, const float*, const int32_t*, int, int, cudaStream_t, float);
template void embedding<__nv_bfloat16>(float*, const __nv_bfloat16*, const int32_t*, int, int, cudaStream_t, float);
template void embedding<__half>(float*, const __half*, const int32_t*, int, int, cudaStream_t, float);

}  // namespace cbatch
