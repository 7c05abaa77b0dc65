// LFM2's short convolution (short_conv.hpp): one launch, a block per (sequence, 128 channels), each thread
// a channel over its sequence's rows in token order (decode and prefill alike); the block code is
// short_conv_block.cuh.
#include "cuda/recurrent/short_conv.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <string>

#include "cuda/common/cuda_check.hpp"
#include "cuda/common/cuda_dtype.cuh"
#include "cuda/recurrent/short_conv_block.cuh"

namespace cbatch {

using namespace recurrent_detail;

namespace {

template <typename T>
__global__ void __launch_bounds__(kConvThreads)
    short_conv_kernel(T* __restrict__ out, const T* __restrict__ proj, const float* __restrict__ taps, int dim,
                      int kernel, RecurrentSeqs seqs, RecurrentStates states) {
  short_conv_block<T>(out, proj, taps, dim, kernel, seqs, states);
}

}  // namespace

template <typename T>
void short_conv(T* d_out, const T* d_proj, const float* d_taps, int dim, int kernel, const RecurrentSeqs& seqs,
                int num_seqs, const RecurrentStates& states, cudaStream_t stream) {
  if (dim <= 0 || kernel < 1 || kernel > kMaxConvKernel) {
    throw Error("short_conv: bad sizes (dim " + std::to_string(dim) + ", conv kernel " + std::to_string(kernel) +
                ", at most " + std::to_string(kMaxConvKernel) + " taps)");
  }
  if (num_seqs == 0) return;
  const dim3 grid(num_seqs, (dim + kConvThreads - 1) / kConvThreads);
  short_conv_kernel<T><<<grid, kConvThreads, 0, stream>>>(d_out, d_proj, d_taps, dim, kernel, seqs, states);
  CUDA_CHECK_LAUNCH();
}

#define CBATCH_INSTANTIATE_SHORT_CONV(T)                                                                      \
  template void short_conv<T>(T*, const T*, const float*, int, int, const RecurrentSeqs&, int,               \
                              const RecurrentStates&, cudaStream_t);
CBATCH_INSTANTIATE_SHORT_CONV(float)
CBATCH_INSTANTIATE_SHORT_CONV(__nv_bfloat16)
CBATCH_INSTANTIATE_SHORT_CONV(__half)
#undef CBATCH_INSTANTIATE_SHORT_CONV

}  // namespace cbatch
