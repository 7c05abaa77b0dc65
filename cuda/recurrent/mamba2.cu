// A Mamba-2 layer's steps between its products (mamba2.hpp): one launch each; the block code is
// mamba2_block.cuh. The conv runs a thread per channel and the scan a block per (sequence, head), both over
// the sequence's rows in token order (decode and prefill alike); the gated norm a warp per (row, group).
// The scan is sequential over a sequence's tokens: a long prefill is one block walking its rows; the chunked
// scan (mamba2_chunked.cu, the SSD form) takes the sequences of at least kMambaChunkRows rows where it is on.
#include "cuda/recurrent/mamba2.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <string>

#include "cuda/common/cuda_check.hpp"
#include "cuda/common/cuda_dtype.cuh"
#include "cuda/recurrent/mamba2_block.cuh"

namespace cbatch {

using namespace recurrent_detail;

namespace {

template <typename T>
__global__ void __launch_bounds__(kConvThreads)
    mamba2_conv_kernel(float* __restrict__ xbc, const T* __restrict__ proj, const float* __restrict__ taps,
                       const float* __restrict__ bias, Mamba2Sizes d, RecurrentSeqs seqs, RecurrentStates states) {
  mamba2_conv_block<T>(xbc, proj, taps, bias, d, seqs, states);
}

template <typename T>
__global__ void mamba2_scan_kernel(float* __restrict__ y, const float* __restrict__ xbc, const T* __restrict__ proj,
                                   const float* __restrict__ decay, const float* __restrict__ dt_bias,
                                   const float* __restrict__ skip, Mamba2Sizes d, RecurrentSeqs seqs,
                                   RecurrentStates states, int chunked_from) {
  extern __shared__ float smem[];
  mamba2_scan_block<T>(y, xbc, proj, decay, dt_bias, skip, d, seqs, states, smem, chunked_from);
}

template <typename T>
__global__ void __launch_bounds__(kMambaNormThreads)
    mamba2_gated_norm_kernel(T* __restrict__ out, const float* __restrict__ y, const T* __restrict__ proj,
                             const float* __restrict__ weight, Mamba2Sizes d, float eps) {
  mamba2_gated_norm_block<T>(out, y, proj, weight, d, eps);
}

void check_dims(const char* op, const Mamba2Sizes& d) {
  if (d.num_heads <= 0 || d.head_dim <= 0 || d.state_size <= 0 || d.num_groups <= 0 ||
      d.num_heads % d.num_groups != 0 || d.conv_kernel < 1 || d.conv_kernel > kMaxConvKernel) {
    throw Error(std::string(op) + ": bad Mamba-2 sizes (heads " + std::to_string(d.num_heads) + ", head dim " +
                std::to_string(d.head_dim) + ", state " + std::to_string(d.state_size) + ", groups " +
                std::to_string(d.num_groups) + ", conv kernel " + std::to_string(d.conv_kernel) + ")");
  }
}

// Threads of a scan block: a row of the head's state per thread, whole warps; shared bytes: S, B and C.
int scan_threads(const Mamba2Sizes& d) { return (d.head_dim + 31) / 32 * 32; }
size_t scan_smem(const Mamba2Sizes& d) { return sizeof(float) * static_cast<size_t>(d.state_size) * (d.head_dim + 2); }

}  // namespace

template <typename T>
void mamba2_conv(float* d_xbc, const T* d_proj, const float* d_taps, const float* d_bias, const Mamba2Sizes& dims,
                 const RecurrentSeqs& seqs, int num_seqs, const RecurrentStates& states, cudaStream_t stream) {
  check_dims("mamba2_conv", dims);
  if (num_seqs == 0) return;
  const dim3 grid(num_seqs, (dims.conv_dim() + kConvThreads - 1) / kConvThreads);
  mamba2_conv_kernel<T><<<grid, kConvThreads, 0, stream>>>(d_xbc, d_proj, d_taps, d_bias, dims, seqs, states);
  CUDA_CHECK_LAUNCH();
}

template <typename T>
void mamba2_scan(float* d_y, const float* d_xbc, const T* d_proj, const float* d_decay, const float* d_dt_bias,
                 const float* d_skip, const Mamba2Sizes& dims, const RecurrentSeqs& seqs, int num_seqs,
                 const RecurrentStates& states, cudaStream_t stream, int chunked_from) {
  check_dims("mamba2_scan", dims);
  if (num_seqs == 0) return;
  const size_t smem = scan_smem(dims);
  if (smem > 48 * 1024) {  // past the default (a head of 64 x 128: 33 KB)
    CUDA_CHECK(cudaFuncSetAttribute(mamba2_scan_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(smem)));
  }
  const dim3 grid(num_seqs, dims.num_heads);
  mamba2_scan_kernel<T><<<grid, scan_threads(dims), smem, stream>>>(d_y, d_xbc, d_proj, d_decay, d_dt_bias, d_skip,
                                                                    dims, seqs, states, chunked_from);
  CUDA_CHECK_LAUNCH();
}

template <typename T>
void mamba2_gated_norm(T* d_out, const float* d_y, const T* d_proj, const float* d_weight, const Mamba2Sizes& dims,
                       int num_rows, float eps, cudaStream_t stream) {
  check_dims("mamba2_gated_norm", dims);
  if (num_rows == 0) return;
  const dim3 grid(num_rows, dims.num_groups);
  mamba2_gated_norm_kernel<T><<<grid, kMambaNormThreads, 0, stream>>>(d_out, d_y, d_proj, d_weight, dims, eps);
  CUDA_CHECK_LAUNCH();
}

#define CBATCH_INSTANTIATE_MAMBA2(T)                                                                            \
  template void mamba2_conv<T>(float*, const T*, const float*, const float*, const Mamba2Sizes&,                 \
                               const RecurrentSeqs&, int, const RecurrentStates&, cudaStream_t);               \
  template void mamba2_scan<T>(float*, const float*, const T*, const float*, const float*, const float*,        \
                               const Mamba2Sizes&, const RecurrentSeqs&, int, const RecurrentStates&,            \
                               cudaStream_t, int);                                                              \
  template void mamba2_gated_norm<T>(T*, const float*, const T*, const float*, const Mamba2Sizes&, int, float,  \
                                     cudaStream_t);
CBATCH_INSTANTIATE_MAMBA2(float)
CBATCH_INSTANTIATE_MAMBA2(__nv_bfloat16)
CBATCH_INSTANTIATE_MAMBA2(__half)
#undef CBATCH_INSTANTIATE_MAMBA2

}  // namespace cbatch
