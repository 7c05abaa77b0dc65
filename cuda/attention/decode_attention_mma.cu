// Split tensor-core decode attention (bf16, fp16; head_dim 32, 64, 128; a cache in T or FP8),
// DecodeKernel::kTensorCores16, the fallback of GPUs where the stream kernel does not fit: the kernel
// around the block code of decode_mma_block.cuh, and its launcher.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cuda/common/cuda_dtype.cuh"
#include "cuda/attention/decode_kernels.cuh"
#include "cuda/attention/decode_mma_block.cuh"

namespace cbatch {
namespace {

using namespace decode_detail;

template <typename T, int HD, bool FAMILY, typename KV>
__global__ void __launch_bounds__(kMmaWarps * 32) decode_attention_mma_kernel(const DecodeArgs<T, KV> a) {
  extern __shared__ __align__(128) unsigned char s_stages[];
  mma_block<T, HD, FAMILY, KV>(a, s_stages);
}

}  // namespace

namespace decode_detail {

template <typename T, bool FAMILY, typename KV>
void launch_tensor_cores(const DecodeArgs<T, KV>& args, int num_seqs, int num_splits, int hd, cudaStream_t stream) {
  with_tensor_core_head_dim(hd, [&](auto head_dim) {
    constexpr int HD = decltype(head_dim)::value;
    launch_split<T, KV>(decode_attention_mma_kernel<T, HD, FAMILY, KV>, kMmaWarps * 32, MmaLayout<T, HD, KV>::kBytes,
                        args, num_seqs, num_splits, HD, stream);
  });
}

#define CBATCH_INSTANTIATE_MMA(T, KV)                                                                        \
  template void launch_tensor_cores<T, false, KV>(const DecodeArgs<T, KV>&, int, int, int, cudaStream_t);    \
  template void launch_tensor_cores<T, true, KV>(const DecodeArgs<T, KV>&, int, int, int, cudaStream_t);
CBATCH_INSTANTIATE_MMA(__nv_bfloat16, __nv_bfloat16)
CBATCH_INSTANTIATE_MMA(__half, __half)
CBATCH_INSTANTIATE_MMA(__nv_bfloat16, Fp8E4M3)
CBATCH_INSTANTIATE_MMA(__half, Fp8E4M3)
#undef CBATCH_INSTANTIATE_MMA

}  // namespace decode_detail
}  // namespace cbatch
