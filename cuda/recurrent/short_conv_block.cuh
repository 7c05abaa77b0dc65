// The block code of LFM2's short convolution (short_conv.cu): from the in projection's rows [B | C | x]
// (dim each), out = C * conv(B * x), the causal depthwise conv over dim channels (conv_L_cache taps, no bias,
// no activation) on causal_conv_block.cuh's rolling window, which holds earlier B * x. Include it as
// causal_conv_block.cuh says.
#pragma once
#include <cstdint>

#include "cuda/recurrent/causal_conv_block.cuh"

namespace cbatch::recurrent_detail {

// A channel's conv input: B * x of row r, in fp32 as the CPU multiplies them.
template <typename T>
struct ShortConvInput {
  const T* proj;  // (rows, 3 dim) [B | C | x]
  int dim;
  __device__ float operator()(int64_t r, int c) const {
    const T* row = proj + r * 3 * dim;
    return to_float(row[c]) * to_float(row[2 * dim + c]);
  }
};

// A channel's output: the conv times C of row r.
template <typename T>
struct ShortConvOutput {
  T* out;         // (rows, dim)
  const T* proj;  // (rows, 3 dim) [B | C | x]
  int dim;
  __device__ void operator()(int64_t r, int c, float conv) const {
    out[r * dim + c] = from_float<T>(conv * to_float(proj[r * 3 * dim + dim + c]));
  }
};

// Block (sequence blockIdx.x, channels from blockIdx.y * blockDim.x): out (rows, dim) = C * conv(B * x).
template <typename T>
__device__ __forceinline__ void short_conv_block(T* __restrict__ out, const T* __restrict__ proj,
                                                 const float* __restrict__ taps,  // (dim, kernel)
                                                 int dim, int kernel, const RecurrentSeqs& seqs,
                                                 const RecurrentStates& states) {
  ConvParams p;
  p.taps = taps;
  p.channels = dim;
  p.kernel = kernel;
  p.windows = states.conv;
  p.window_stride = states.conv_stride;
  causal_conv_block(ShortConvInput<T>{proj, dim}, ShortConvOutput<T>{out, proj, dim}, p, seqs);
}

}  // namespace cbatch::recurrent_detail
