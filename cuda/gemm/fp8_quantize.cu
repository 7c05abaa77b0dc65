// Per-tensor FP8 quantization kernels (block code in fp8_quantize_block.cuh): fp8_amax_kernel writes one
// partial maximum per block, fp8_quantize_kernel reduces them again in every block (at most
// kFp8MaxPartials floats, cheap next to its share of the tensor) and writes the codes. Grid-stride loops
// over flat indices (size_t: an 8B gate|up matrix holds 2 * 14336 * 4096 elements).
#include "cuda/gemm/fp8_quantize.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <vector>

#include "cuda/common/cuda_check.hpp"
#include "cuda/common/cuda_dtype.cuh"
#include "cuda/gemm/fp8_quantize_block.cuh"

namespace cbatch {

using fp8_detail::kFp8MaxPartials;
using fp8_detail::kFp8Threads;
static_assert(kFp8MaxPartials <= kFp8PartialFloats);

template <typename T>
__global__ void __launch_bounds__(kFp8Threads) fp8_amax_kernel(const T* __restrict__ x, size_t n,
                                                               float* __restrict__ partials) {
  fp8_detail::fp8_amax_block<T>(x, n, partials);
}

template <typename T>
__global__ void __launch_bounds__(kFp8Threads) fp8_quantize_kernel(uint8_t* __restrict__ q, float* __restrict__ scale,
                                                                   const T* __restrict__ x, size_t n,
                                                                   const float* __restrict__ partials,
                                                                   int num_partials) {
  fp8_detail::fp8_quantize_block<T>(q, scale, x, n, partials, num_partials);
}

namespace {

// Blocks of both passes: about 16 elements a thread (two or more 16-byte packs), at least one block (n == 0
// still writes the scale).
int fp8_grid(size_t n) {
  const size_t per_block = static_cast<size_t>(16 * kFp8Threads);
  return static_cast<int>(std::clamp<size_t>((n + per_block - 1) / per_block, 1, kFp8MaxPartials));
}

template <typename T>
int launch_amax(const T* d_x, size_t n, float* d_partials, cudaStream_t stream) {
  if (d_partials == nullptr || (n > 0 && d_x == nullptr)) throw Error("fp8 quantization: null buffer");
  const int grid = fp8_grid(n);
  fp8_amax_kernel<T><<<grid, kFp8Threads, 0, stream>>>(d_x, n, d_partials);
  CUDA_CHECK_LAUNCH();
  return grid;
}

}  // namespace

template <typename T>
void fp8_quantize(uint8_t* d_q, float* d_scale, const T* d_x, size_t n, float* d_partials, cudaStream_t stream) {
  if (d_scale == nullptr || (n > 0 && d_q == nullptr)) throw Error("fp8_quantize: null output buffer");
  const int grid = launch_amax(d_x, n, d_partials, stream);
  fp8_quantize_kernel<T><<<grid, kFp8Threads, 0, stream>>>(d_q, d_scale, d_x, n, d_partials, grid);
  CUDA_CHECK_LAUNCH();
}

template <typename T>
float fp8_amax(const T* d_x, size_t n, float* d_partials, cudaStream_t stream) {
  const int grid = launch_amax(d_x, n, d_partials, stream);
  std::vector<float> partials(static_cast<size_t>(grid));
  CUDA_CHECK(cudaMemcpyAsync(partials.data(), d_partials, partials.size() * sizeof(float), cudaMemcpyDeviceToHost,
                             stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  return *std::max_element(partials.begin(), partials.end());
}

#define CBATCH_INSTANTIATE_FP8(T)                                                              \
  template void fp8_quantize<T>(uint8_t*, float*, const T*, size_t, float*, cudaStream_t); \
  template float fp8_amax<T>(const T*, size_t, float*, cudaStream_t);
CBATCH_INSTANTIATE_FP8(float)
CBATCH_INSTANTIATE_FP8(__nv_bfloat16)
CBATCH_INSTANTIATE_FP8(__half)
#undef CBATCH_INSTANTIATE_FP8

}  // namespace cbatch
