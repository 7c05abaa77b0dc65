// The chunked gated delta rule (deltanet_chunked.hpp): a prepare launch over (chunk, value head), then a
// state launch over (chunked sequence, value head, column tile); the block code is deltanet_chunked_block.cuh.
#include "cuda/recurrent/deltanet_chunked.hpp"

#include <string>

#include "cuda/common/cuda_check.hpp"
#include "cuda/common/cuda_dtype.cuh"
#include "cuda/recurrent/deltanet_chunked_block.cuh"

namespace cbatch {

using namespace deltanet_detail;

namespace {

__global__ void __launch_bounds__(kPrepareThreads)
    chunk_prepare_kernel(DeltaNetChunkWork work, const float* __restrict__ conv_out, const float* __restrict__ gates,
                         DeltaNetSizes d, DeltaNetChunks chunks) {
  extern __shared__ float smem[];
  chunk_prepare_block(work, conv_out, gates, d, chunks, smem);
}

__global__ void __launch_bounds__(kStateCols)
    chunk_state_kernel(float* __restrict__ core, const float* __restrict__ conv_out, DeltaNetChunkWork work,
                       DeltaNetSizes d, DeltaNetSeqs seqs, DeltaNetChunks chunks, DeltaNetStates states) {
  extern __shared__ float smem[];
  chunk_state_block(core, conv_out, work, d, seqs, chunks, states, smem);
}

// Opts the kernel into smem bytes of dynamic shared memory where that is past the default 48 KB.
template <typename Kernel>
void allow_shared_memory(Kernel kernel, size_t smem) {
  if (smem > 48 * 1024) {
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  }
}

}  // namespace

void deltanet_chunked_delta_rule(float* d_core, const float* d_conv_out, const float* d_gates,
                                 const DeltaNetChunkWork& work, const DeltaNetSizes& dims, const DeltaNetSeqs& seqs,
                                 const DeltaNetChunks& chunks, int num_chunked_seqs, int num_chunks,
                                 const DeltaNetStates& states, cudaStream_t stream) {
  if (dims.num_k_heads <= 0 || dims.num_v_heads <= 0 || dims.num_v_heads % dims.num_k_heads != 0 ||
      dims.k_head_dim <= 0 || dims.v_head_dim <= 0) {
    throw Error("deltanet_chunked_delta_rule: bad DeltaNet sizes (key heads " + std::to_string(dims.num_k_heads) +
                ", value heads " + std::to_string(dims.num_v_heads) + ", head dims " +
                std::to_string(dims.k_head_dim) + "/" + std::to_string(dims.v_head_dim) + ")");
  }
  if (num_chunked_seqs == 0 || num_chunks == 0) return;
  const size_t prepare_smem = sizeof(float) * static_cast<size_t>(prepare_smem_floats(dims));
  const size_t state_smem = sizeof(float) * static_cast<size_t>(state_smem_floats(dims));
  allow_shared_memory(chunk_prepare_kernel, prepare_smem);  // Qwen3.5's 128 x 128 heads: 50 and 56 KB
  allow_shared_memory(chunk_state_kernel, state_smem);
  chunk_prepare_kernel<<<dim3(num_chunks, dims.num_v_heads), kPrepareThreads, prepare_smem, stream>>>(
      work, d_conv_out, d_gates, dims, chunks);
  CUDA_CHECK_LAUNCH();
  const dim3 grid(num_chunked_seqs, dims.num_v_heads, (dims.v_head_dim + kStateCols - 1) / kStateCols);
  chunk_state_kernel<<<grid, kStateCols, state_smem, stream>>>(d_core, d_conv_out, work, dims, seqs, chunks, states);
  CUDA_CHECK_LAUNCH();
}

}  // namespace cbatch
