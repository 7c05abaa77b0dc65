// Weight materialization on the device: dummy random tensors are generated element by element with the
// shared counter-based generator (so an 8B dummy model never touches host memory), host-converted fp32
// chunks are narrowed to the compute dtype, and uploaded GGUF blocks are decoded element by element with
// the host's own formulas (quant_blocks.hpp). Grid-stride loops over flat element indices (size_t: an
// lm_head holds 128256 * 4096 elements).
#include "cuda/backend/weight_convert.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "cuda/common/cuda_check.hpp"
#include "cuda/common/cuda_dtype.cuh"
#include "engine/model/quant_blocks.hpp"
#include "engine/model/random_weights.hpp"

namespace cbatch {

constexpr int kConvertThreads = 256;

template <typename T>
__global__ void fill_random_kernel(T* __restrict__ out, size_t n, uint64_t seed, float scale, float offset) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    out[i] = from_float<T>(random_element(seed, scale, offset, static_cast<uint64_t>(i)));
  }
}

// One thread per block: the host's own block generator.
__global__ void fill_random_mxfp4_kernel(uint8_t* __restrict__ out, size_t num_blocks, uint64_t seed, int e0,
                                         uint64_t first_block) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t b = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; b < num_blocks; b += stride) {
    random_mxfp4_block(seed, e0, first_block + b, out + b * BlockFormat<DType::kMXFP4>::kBytes);
  }
}

template <typename T>
__global__ void convert_f32_kernel(T* __restrict__ out, const float* __restrict__ in, size_t n) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    out[i] = from_float<T>(in[i]);
  }
}

// One thread per element: its block, its sub-block's scale (decoded again by each of its elements: this
// runs once, at load) and its code, through block_element.
template <class F, typename T>
__global__ void decode_blocks_kernel(T* __restrict__ out, const uint8_t* __restrict__ blocks, size_t n) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const size_t block = i / F::kElems;
    out[i] = from_float<T>(block_element<F>(blocks + block * F::kBytes, static_cast<int>(i % F::kElems)));
  }
}

static unsigned grid_for(size_t n) {
  return static_cast<unsigned>(std::min<size_t>((n + kConvertThreads - 1) / kConvertThreads, 65536));
}

template <typename T>
void fill_random(T* d_out, size_t n, uint64_t seed, float scale, float offset, cudaStream_t stream) {
  if (n == 0) return;
  fill_random_kernel<T><<<grid_for(n), kConvertThreads, 0, stream>>>(d_out, n, seed, scale, offset);
  CUDA_CHECK_LAUNCH();
}

void fill_random_mxfp4(uint8_t* d_out, size_t num_blocks, uint64_t seed, float scale, uint64_t first_block,
                       cudaStream_t stream) {
  if (num_blocks == 0) return;
  fill_random_mxfp4_kernel<<<grid_for(num_blocks), kConvertThreads, 0, stream>>>(
      d_out, num_blocks, seed, random_mxfp4_exponent(scale), first_block);
  CUDA_CHECK_LAUNCH();
}

template <typename T>
void convert_f32(T* d_out, const float* d_in, size_t n, cudaStream_t stream) {
  if (n == 0) return;
  convert_f32_kernel<T><<<grid_for(n), kConvertThreads, 0, stream>>>(d_out, d_in, n);
  CUDA_CHECK_LAUNCH();
}

template <typename T>
void decode_blocks(T* d_out, const uint8_t* d_blocks, DType dtype, size_t num_blocks, cudaStream_t stream) {
  if (num_blocks == 0) return;
  with_block_format(dtype, [&](auto format) {
    using F = decltype(format);
    const size_t n = num_blocks * F::kElems;
    decode_blocks_kernel<F, T><<<grid_for(n), kConvertThreads, 0, stream>>>(d_out, d_blocks, n);
  });
  CUDA_CHECK_LAUNCH();
}

#define CBATCH_INSTANTIATE_CONVERT(T)                                                        \
  template void fill_random<T>(T*, size_t, uint64_t, float, float, cudaStream_t);          \
  template void convert_f32<T>(T*, const float*, size_t, cudaStream_t);                    \
  template void decode_blocks<T>(T*, const uint8_t*, DType, size_t, cudaStream_t);
CBATCH_INSTANTIATE_CONVERT(float)
CBATCH_INSTANTIATE_CONVERT(__nv_bfloat16)
CBATCH_INSTANTIATE_CONVERT(__half)
#undef CBATCH_INSTANTIATE_CONVERT

}  // namespace cbatch
