// Tensor-core decode attention (bf16, fp16; head_dim 32, 64, 128), DecodeKernel::kTensorCores and
// kTensorCores16: the kernel around the block code of decode_mma_block.cuh, and its launcher.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cuda/cuda_dtype.cuh"
#include "cuda/decode_kernels.cuh"
#include "cuda/decode_mma_block.cuh"

namespace cbatch {
namespace {

using namespace decode_detail;

template <typename T, int HD, int TILE, bool FAMILY>
__global__ void __launch_bounds__(kMmaWarps * 32) decode_attention_mma_kernel(const DecodeArgs<T> a) {
  extern __shared__ __align__(128) unsigned char s_stages[];
  mma_block<T, HD, TILE, FAMILY>(a, s_stages);
}

}  // namespace

namespace decode_detail {

template <typename T, int TILE, bool FAMILY>
void launch_tensor_cores(const DecodeArgs<T>& args, int num_seqs, int num_splits, int hd, cudaStream_t stream) {
  with_tensor_core_head_dim(hd, [&](auto head_dim) {
    constexpr int HD = decltype(head_dim)::value;
    launch_split<T>(decode_attention_mma_kernel<T, HD, TILE, FAMILY>, kMmaWarps * 32, MmaLayout<T, HD, TILE>::kBytes,
                    args, num_seqs, num_splits, HD, stream);
  });
}

#define CBATCH_INSTANTIATE_MMA(T, TILE)                                                                     \
  template void launch_tensor_cores<T, TILE, false>(const DecodeArgs<T>&, int, int, int, cudaStream_t);     \
  template void launch_tensor_cores<T, TILE, true>(const DecodeArgs<T>&, int, int, int, cudaStream_t);
CBATCH_INSTANTIATE_MMA(__nv_bfloat16, 16)
CBATCH_INSTANTIATE_MMA(__nv_bfloat16, 32)
CBATCH_INSTANTIATE_MMA(__half, 16)
CBATCH_INSTANTIATE_MMA(__half, 32)
#undef CBATCH_INSTANTIATE_MMA

}  // namespace decode_detail
}  // namespace cbatch
