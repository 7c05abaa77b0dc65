// Host launcher of LFM2's short convolution between its products (short_conv.cu): a layer is
//   proj = h [B | C | x] (a GEMM, dim each), short_conv, then the output GEMM of its result,
// with each sequence's conv window ((conv_kernel - 1, dim) fp32, earlier B * x) in its state slot. The
// formulas are those of the CPU's cpu_short_conv.cpp.
#pragma once
#include <cuda_runtime.h>

#include "cuda/recurrent/deltanet_shape.hpp"

namespace cbatch {

// out (rows, dim) T = C * causal conv(B * x) over each sequence's window and rows; the windows advance past
// the real rows. proj (rows, 3 dim) T, taps (dim, kernel) fp32; states.conv / conv_stride the windows.
// kernel in [1, kMaxConvKernel].
template <typename T>
void short_conv(T* d_out, const T* d_proj, const float* d_taps, int dim, int kernel,
                const deltanet_detail::DeltaNetSeqs& seqs, int num_seqs, const deltanet_detail::DeltaNetStates& states,
                cudaStream_t stream);

}  // namespace cbatch
