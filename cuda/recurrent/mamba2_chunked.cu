// The chunked Mamba-2 scan (mamba2_chunked.hpp): two launches, the intra-chunk outputs (a block per chunk, head
// and sequence) then the state pass (a block per 32 rows of a head's state and sequence walking its chunks, its
// rows of the state in shared memory); the block code is mamba2_chunked_block.cuh. fp32 on CUDA cores; the
// chunk's products (C B^T, the masked product with x, S C and x^T B) are what a tensor-core version would take.
#include "cuda/recurrent/mamba2_chunked.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <string>

#include "cuda/common/cuda_check.hpp"
#include "cuda/common/cuda_dtype.cuh"
#include "cuda/recurrent/mamba2_chunked_block.cuh"

namespace cbatch {

using namespace recurrent_detail;

namespace {

template <typename T>
__global__ void __launch_bounds__(kChunkThreads)
    mamba2_chunk_intra_kernel(float* __restrict__ y, const float* __restrict__ xbc, const T* __restrict__ proj,
                              const float* __restrict__ decay, const float* __restrict__ dt_bias,
                              const float* __restrict__ skip, Mamba2Sizes d, RecurrentSeqs seqs) {
  extern __shared__ float smem[];
  mamba2_chunk_intra_block<T>(y, xbc, proj, decay, dt_bias, skip, d, seqs, smem);
}

// At least one block a SM (a block per head and sequence: few) lets ptxas give its 4 x 4 tiles the registers
// they need (105, no spills; 48 with spills without the bound).
template <typename T>
__global__ void __launch_bounds__(kChunkThreads, 1)
    mamba2_chunk_state_kernel(float* __restrict__ y, const float* __restrict__ xbc, const T* __restrict__ proj,
                              const float* __restrict__ decay, const float* __restrict__ dt_bias, Mamba2Sizes d,
                              RecurrentSeqs seqs, RecurrentStates states) {
  extern __shared__ float smem[];
  mamba2_chunk_state_block<T>(y, xbc, proj, decay, dt_bias, d, seqs, states, smem);
}

// Raises the kernel's dynamic shared memory past the default 48 KB where it needs more (a state of 64 x 128:
// 42 KB a state block, 34 KB an intra-chunk one; a state past 200 columns needs more); a head too large for the GPU
// is refused by name.
template <typename Kernel>
void allow_smem(Kernel kernel, size_t bytes, const char* op) {
  if (bytes <= 48 * 1024) return;
  int device = 0, optin = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  if (bytes > static_cast<size_t>(optin)) {
    throw Error(std::string(op) + ": a Mamba-2 head needs " + std::to_string(bytes) +
                " bytes of shared memory, the GPU has " + std::to_string(optin) +
                " a block (use --cuda-kernel mamba-scan=recurrent)");
  }
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
}

}  // namespace

template <typename T>
void mamba2_chunked_scan(float* d_y, const float* d_xbc, const T* d_proj, const float* d_decay, const float* d_dt_bias,
                         const float* d_skip, const Mamba2Sizes& dims, const RecurrentSeqs& seqs, int num_seqs,
                         int max_seq_rows, const RecurrentStates& states, cudaStream_t stream) {
  if (dims.num_heads <= 0 || dims.head_dim <= 0 || dims.state_size <= 0 || dims.num_groups <= 0 ||
      dims.num_heads % dims.num_groups != 0) {
    throw Error("mamba2_chunked_scan: bad Mamba-2 sizes (heads " + std::to_string(dims.num_heads) + ", head dim " +
                std::to_string(dims.head_dim) + ", state " + std::to_string(dims.state_size) + ", groups " +
                std::to_string(dims.num_groups) + ")");
  }
  if (num_seqs == 0 || max_seq_rows < kMambaChunkRows) return;
  const size_t intra_smem = sizeof(float) * static_cast<size_t>(chunk_intra_floats());
  const size_t state_smem = sizeof(float) * static_cast<size_t>(chunk_state_floats(dims));
  allow_smem(mamba2_chunk_intra_kernel<T>, intra_smem, "mamba2_chunked_scan");
  allow_smem(mamba2_chunk_state_kernel<T>, state_smem, "mamba2_chunked_scan");
  const int chunks = (max_seq_rows + kMambaChunkRows - 1) / kMambaChunkRows;
  const dim3 intra_grid(chunks, dims.num_heads, num_seqs);
  mamba2_chunk_intra_kernel<T><<<intra_grid, kChunkThreads, intra_smem, stream>>>(d_y, d_xbc, d_proj, d_decay,
                                                                                 d_dt_bias, d_skip, dims, seqs);
  CUDA_CHECK_LAUNCH();
  const dim3 state_grid(dims.num_heads * chunk_state_parts(dims), num_seqs);
  mamba2_chunk_state_kernel<T><<<state_grid, kChunkThreads, state_smem, stream>>>(d_y, d_xbc, d_proj, d_decay,
                                                                                 d_dt_bias, dims, seqs, states);
  CUDA_CHECK_LAUNCH();
}

#define CBATCH_INSTANTIATE_MAMBA2_CHUNKED(T)                                                                     \
  template void mamba2_chunked_scan<T>(float*, const float*, const T*, const float*, const float*, const float*, \
                                       const Mamba2Sizes&, const RecurrentSeqs&, int, int, const RecurrentStates&, \
                                       cudaStream_t);
CBATCH_INSTANTIATE_MAMBA2_CHUNKED(float)
CBATCH_INSTANTIATE_MAMBA2_CHUNKED(__nv_bfloat16)
CBATCH_INSTANTIATE_MAMBA2_CHUNKED(__half)
#undef CBATCH_INSTANTIATE_MAMBA2_CHUNKED

}  // namespace cbatch
