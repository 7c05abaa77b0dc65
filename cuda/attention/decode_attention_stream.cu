// Stream decode attention (bf16, fp16; head_dim 32, 64, 128; a cache in T or FP8), DecodeKernel::kStream:
// the kernels around the block code of decode_stream_block.cuh, their launcher and the occupancy query.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <string>
#include <type_traits>

#include "cuda/common/cuda_dtype.cuh"
#include "cuda/attention/decode_attention.hpp"
#include "cuda/attention/decode_kernels.cuh"
#include "cuda/attention/decode_stream_block.cuh"
#include "cuda/common/kernel_smem.hpp"

namespace cbatch {
namespace {

using namespace decode_detail;

template <typename T, int HD, int STAGES, bool FAMILY, typename KV>
__global__ void __launch_bounds__(kMmaWarps * 32) decode_attention_stream_kernel(const DecodeArgs<T, KV> a,
                                                                                 const StreamArgs st) {
  extern __shared__ __align__(128) unsigned char s_stream[];
  stream_block<T, HD, STAGES, FAMILY, KV>(a, st, s_stream);
}

// Merges the pieces of the items cut by warp ranges (stream_combine_block).
template <typename T, typename KV>
__global__ void decode_stream_combine_kernel(const DecodeArgs<T, KV> a, const StreamArgs st) {
  stream_combine_block(a, st);
}

// The pipeline depths the stream kernel is built with, as a compile-time constant for f.
template <typename F>
void with_stream_stages(int stages, F&& f) {
  switch (stages) {
    case 2: return f(std::integral_constant<int, 2>{});
    case 3: return f(std::integral_constant<int, 3>{});
    default: throw Error("decode_attention: the stream kernel has no " + std::to_string(stages) + "-stage build");
  }
}

}  // namespace

namespace decode_detail {

template <typename T, bool FAMILY, typename KV>
void launch_stream(const DecodeArgs<T, KV>& args, const StreamArgs& st, int stages, int hd, cudaStream_t stream) {
  with_tensor_core_head_dim(hd, [&](auto head_dim) {
    with_stream_stages(stages, [&](auto num_stages) {
      constexpr int HD = decltype(head_dim)::value;
      constexpr int STAGES = decltype(num_stages)::value;
      auto* kernel = decode_attention_stream_kernel<T, HD, STAGES, FAMILY, KV>;
      constexpr size_t smem = StreamLayout<T, HD, STAGES, KV>::kBytes;
      allow_dynamic_shared_memory(reinterpret_cast<const void*>(kernel), smem);
      const unsigned ctas = static_cast<unsigned>((st.num_warps + kMmaWarps - 1) / kMmaWarps);
      kernel<<<ctas, kMmaWarps * 32, smem, stream>>>(args, st);
      CUDA_CHECK_LAUNCH();
    });
  });
  if (st.num_warps > 1) {
    decode_stream_combine_kernel<T, KV><<<static_cast<unsigned>(st.num_warps), hd, 0, stream>>>(args, st);
    CUDA_CHECK_LAUNCH();
  }
}

#define CBATCH_INSTANTIATE_STREAM(T, KV)                                                                       \
  template void launch_stream<T, false, KV>(const DecodeArgs<T, KV>&, const StreamArgs&, int, int, cudaStream_t); \
  template void launch_stream<T, true, KV>(const DecodeArgs<T, KV>&, const StreamArgs&, int, int, cudaStream_t);
CBATCH_INSTANTIATE_STREAM(__nv_bfloat16, __nv_bfloat16)
CBATCH_INSTANTIATE_STREAM(__half, __half)
CBATCH_INSTANTIATE_STREAM(__nv_bfloat16, Fp8E4M3)
CBATCH_INSTANTIATE_STREAM(__half, Fp8E4M3)
#undef CBATCH_INSTANTIATE_STREAM

}  // namespace decode_detail

template <typename T, typename KV>
DecodeStreamLimits decode_stream_limits(int head_dim, int max_stages) {
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  int num_sms = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&num_sms, cudaDevAttrMultiProcessorCount, device));
  int max_smem = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&max_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  size_t smallest = 0;
  for (const int stages : {3, 2}) {  // the deepest pipeline whose shared memory fits
    if (stages > max_stages) continue;
    int ctas_per_sm = 0;
    with_tensor_core_head_dim(head_dim, [&](auto hd) {
      with_stream_stages(stages, [&](auto num_stages) {
        constexpr int HD = decltype(hd)::value;
        constexpr int STAGES = decltype(num_stages)::value;
        auto* kernel = decode_attention_stream_kernel<T, HD, STAGES, false, KV>;  // the family build's is alike
        smallest = StreamLayout<T, HD, STAGES, KV>::kBytes;
        if (smallest > static_cast<size_t>(max_smem)) return;  // asking would fail
        allow_dynamic_shared_memory(reinterpret_cast<const void*>(kernel), smallest);
        CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&ctas_per_sm, kernel, kMmaWarps * 32, smallest));
      });
    });
    if (ctas_per_sm > 0) return DecodeStreamLimits{stages, ctas_per_sm * kMmaWarps * num_sms};
  }
  throw Error("the stream decode kernel (--cuda-kernel decode=stream, the default) needs at least " +
              std::to_string(smallest) + " bytes of shared memory per block at head_dim " + std::to_string(head_dim) +
              "; this GPU allows " + std::to_string(max_smem) + ". Use --cuda-kernel decode=tensor-cores-16");
}

template <typename T, typename KV>
size_t decode_stream_smem_bytes(int head_dim, int stages) {
  size_t bytes = 0;
  with_tensor_core_head_dim(head_dim, [&](auto hd) {
    with_stream_stages(stages, [&](auto num_stages) {
      bytes = StreamLayout<T, decltype(hd)::value, decltype(num_stages)::value, KV>::kBytes;
    });
  });
  return bytes;
}

#define CBATCH_INSTANTIATE_STREAM_LIMITS(T, KV)                                 \
  template DecodeStreamLimits decode_stream_limits<T, KV>(int, int);            \
  template size_t decode_stream_smem_bytes<T, KV>(int, int);
CBATCH_INSTANTIATE_STREAM_LIMITS(__nv_bfloat16, __nv_bfloat16)
CBATCH_INSTANTIATE_STREAM_LIMITS(__half, __half)
CBATCH_INSTANTIATE_STREAM_LIMITS(__nv_bfloat16, Fp8E4M3)
CBATCH_INSTANTIATE_STREAM_LIMITS(__half, Fp8E4M3)
#undef CBATCH_INSTANTIATE_STREAM_LIMITS

}  // namespace cbatch
