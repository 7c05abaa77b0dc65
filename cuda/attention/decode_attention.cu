// Decode attention: one query row per sequence, all q heads of a kv head in one CTA. This file: the
// CUDA-core kernel (every dtype and head_dim), the merge of split-KV partials, and the dispatcher over
// all decode kernels (the tensor-core ones are in decode_attention_mma.cu and decode_attention_stream.cu).
//
// Grid (num_seqs, num_kv_heads, num_splits), 128 threads. The CTA walks its key range in chunks of 128
// keys, one key per thread: a thread loads its key's K and V rows (16-byte loads through the block table),
// keeps V in shared memory (sizeof(T) * 128 * head_dim bytes) and scores K against the group's q vectors
// (fp32, pre-scaled, in shared memory, read as broadcasts). The
// chunk's max and sum per head are reduced over the block (online softmax, fp32), the probabilities go to
// shared memory, and the threads switch roles: thread t accumulates the dim pair t % (head_dim / 2) of every
// head over every (128 / (head_dim / 2))-th key of the chunk, reading value rows from shared memory as
// pairs; the key groups' sums are added at the end. With one split
// the CTA writes out = o / l; with several it writes (o, m, l) and decode_combine_kernel merges them.
// The family build (decode_args.cuh) splits the keys of the row's window and softcaps the scores. The
// block code of the kernel and the merge is in decode_cuda_cores_block.cuh. head_dim 16, 32, 64, 128 and
// 256 (Gemma's: 64 KB of value rows in bf16, 128 KB in fp32).
#include "cuda/attention/decode_attention.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>

#include "cuda/common/cuda_check.hpp"
#include "cuda/common/cuda_dtype.cuh"
#include "cuda/attention/decode_cuda_cores_block.cuh"
#include "cuda/attention/decode_kernels.cuh"
#include "cuda/common/kernel_smem.hpp"

namespace cbatch {
namespace {

using namespace decode_detail;

template <typename T, int HD, bool FAMILY, typename KV>
__global__ void __launch_bounds__(cuda_cores::kThreads) decode_attention_kernel(const DecodeArgs<T, KV> a) {
  extern __shared__ __align__(16) unsigned char s_dynamic[];
  cuda_cores::cuda_cores_block<T, HD, FAMILY, KV>(a, s_dynamic);
}

template <typename T, typename KV>
__global__ void decode_combine_kernel(const DecodeArgs<T, KV> a, int num_splits) {
  cuda_cores::combine_block(a, num_splits);
}

}  // namespace

namespace decode_detail {

template <typename T, typename KV>
void launch_split(void (*kernel)(DecodeArgs<T, KV>), int threads, size_t smem_bytes, const DecodeArgs<T, KV>& args,
                  int num_seqs, int num_splits, int hd, cudaStream_t stream) {
  allow_dynamic_shared_memory(reinterpret_cast<const void*>(kernel), smem_bytes);
  const dim3 grid(static_cast<unsigned>(num_seqs), static_cast<unsigned>(args.num_kv_heads),
                  static_cast<unsigned>(num_splits));
  kernel<<<grid, threads, smem_bytes, stream>>>(args);
  CUDA_CHECK_LAUNCH();
  if (num_splits > 1) {
    decode_combine_kernel<T, KV><<<dim3(num_seqs, args.num_heads), hd, 0, stream>>>(args, num_splits);
    CUDA_CHECK_LAUNCH();
  }
}

template void launch_split<float>(void (*)(DecodeArgs<float>), int, size_t, const DecodeArgs<float>&, int, int, int,
                                 cudaStream_t);
template void launch_split<__nv_bfloat16>(void (*)(DecodeArgs<__nv_bfloat16>), int, size_t,
                                         const DecodeArgs<__nv_bfloat16>&, int, int, int, cudaStream_t);
template void launch_split<__half>(void (*)(DecodeArgs<__half>), int, size_t, const DecodeArgs<__half>&, int, int, int,
                                  cudaStream_t);
template void launch_split<__nv_bfloat16, Fp8E4M3>(void (*)(DecodeArgs<__nv_bfloat16, Fp8E4M3>), int, size_t,
                                                   const DecodeArgs<__nv_bfloat16, Fp8E4M3>&, int, int, int,
                                                   cudaStream_t);
template void launch_split<__half, Fp8E4M3>(void (*)(DecodeArgs<__half, Fp8E4M3>), int, size_t,
                                            const DecodeArgs<__half, Fp8E4M3>&, int, int, int, cudaStream_t);

}  // namespace decode_detail

namespace {

template <typename T, int HD, bool FAMILY, typename KV>
void launch_cuda_cores(const DecodeArgs<T, KV>& args, int num_seqs, int num_splits, cudaStream_t stream) {
  launch_split<T, KV>(decode_attention_kernel<T, HD, FAMILY, KV>, cuda_cores::kThreads,
                      cuda_cores::decode_smem_bytes<KV, HD>(), args, num_seqs, num_splits, HD, stream);
}

// Launches the kernel's FAMILY build for the decode rows.
template <typename T, bool FAMILY, typename KV>
void launch_decode(const DecodeArgs<T, KV>& args, int num_seqs, const DecodeSplit& split, int hd, DecodeKernel kernel,
                   const DecodeStream* plan, cudaStream_t stream) {
  if (kernel != DecodeKernel::kCudaCores) {
    if constexpr (std::is_same_v<T, float>) {
      throw Error("decode_attention: the tensor-core kernels take bf16 or fp16");
    } else if (kernel == DecodeKernel::kStream) {
      const StreamArgs st{plan->tile_start, plan->num_tiles, plan->num_warps, num_seqs};
      return launch_stream<T, FAMILY, KV>(args, st, plan->stages, hd, stream);
    } else {
      return launch_tensor_cores<T, FAMILY, KV>(args, num_seqs, split.num_splits, hd, stream);
    }
  }
  switch (hd) {
    case 16: return launch_cuda_cores<T, 16, FAMILY, KV>(args, num_seqs, split.num_splits, stream);
    case 32: return launch_cuda_cores<T, 32, FAMILY, KV>(args, num_seqs, split.num_splits, stream);
    case 64: return launch_cuda_cores<T, 64, FAMILY, KV>(args, num_seqs, split.num_splits, stream);
    case 128: return launch_cuda_cores<T, 128, FAMILY, KV>(args, num_seqs, split.num_splits, stream);
    case 256: return launch_cuda_cores<T, 256, FAMILY, KV>(args, num_seqs, split.num_splits, stream);
    default: throw Error("decode_attention: head_dim " + std::to_string(hd) + " is not 16, 32, 64, 128 or 256");
  }
}

}  // namespace

bool decode_tensor_cores_support(int head_dim) { return head_dim == 32 || head_dim == 64 || head_dim == 128; }

template <typename T>
size_t decode_cuda_cores_smem_bytes(int head_dim) {
  auto bytes = [](auto hd) {
    constexpr int HD = decltype(hd)::value;
    return cuda_cores::decode_smem_bytes<T, HD>() + cuda_cores::static_smem_bytes<HD>();
  };
  switch (head_dim) {
    case 16: return bytes(std::integral_constant<int, 16>{});
    case 32: return bytes(std::integral_constant<int, 32>{});
    case 64: return bytes(std::integral_constant<int, 64>{});
    case 128: return bytes(std::integral_constant<int, 128>{});
    case 256: return bytes(std::integral_constant<int, 256>{});
    default: throw Error("decode_attention: head_dim " + std::to_string(head_dim) + " is not 16, 32, 64, 128 or 256");
  }
}
template size_t decode_cuda_cores_smem_bytes<float>(int);
template size_t decode_cuda_cores_smem_bytes<__nv_bfloat16>(int);
template size_t decode_cuda_cores_smem_bytes<__half>(int);
template size_t decode_cuda_cores_smem_bytes<Fp8E4M3>(int);


DecodeSplit choose_decode_split(int num_seqs, int num_kv_heads, int max_seq_len, int target_ctas, int max_partials) {
  DecodeSplit split;
  const int chunks = std::max(1, (max_seq_len + kDecodeKeysPerChunk - 1) / kDecodeKeysPerChunk);
  const int base = std::max(1, num_seqs * num_kv_heads);
  int splits = std::min({chunks, (target_ctas + base - 1) / base, std::max(1, max_partials / base)});
  splits = std::max(1, splits);
  const int chunks_per_split = (chunks + splits - 1) / splits;
  split.num_splits = (chunks + chunks_per_split - 1) / chunks_per_split;  // no empty trailing splits
  split.keys_per_split = chunks_per_split * kDecodeKeysPerChunk;
  return split;
}

template <typename T, typename KV>
void decode_attention(T* d_out, const T* d_qkv, const KvElement<KV>* d_k_cache,
                      const KvElement<KV>* d_v_cache, const int32_t* d_positions,
                      const int32_t* d_query_start, const int32_t* d_block_tables, int max_blocks_per_seq,
                      const int32_t* d_decode_seqs, int num_seqs, const DecodeSplit& split, float* d_partial_o,
                      float* d_partial_ml, int max_partials, const AttentionShape& shape, cudaStream_t stream,
                      DecodeKernel kernel, const DecodeStream* plan, const AttentionScoring& scoring,
                      const KvScales& scales) {
  const int hd = shape.head_dim;
  const int group = shape.num_kv_heads > 0 ? shape.num_heads / shape.num_kv_heads : 0;
  const bool ok = num_seqs >= 0 && num_seqs <= 2147483647 && group >= 1 && group <= kDecodeMaxGroup &&
                  shape.num_heads % shape.num_kv_heads == 0 && shape.num_kv_heads <= 65535 && shape.block_size > 0 &&
                  split.num_splits >= 1 && split.num_splits <= 65535 && split.keys_per_split > 0 &&
                  split.keys_per_split % kDecodeKeysPerChunk == 0 &&
                  (split.num_splits == 1 || (static_cast<int64_t>(num_seqs) * shape.num_kv_heads * split.num_splits <=
                                                 max_partials && d_partial_o != nullptr && d_partial_ml != nullptr));
  if (!ok) {
    throw Error("decode_attention: bad sizes num_seqs=" + std::to_string(num_seqs) + " heads=" +
                std::to_string(shape.num_heads) + "/" + std::to_string(shape.num_kv_heads) + " splits=" +
                std::to_string(split.num_splits) + " keys_per_split=" + std::to_string(split.keys_per_split) +
                " max_partials=" + std::to_string(max_partials));
  }
  // The stream kernel: its plan fits the partial scratch, and cache rows index as int32.
  const bool stream_ok =
      kernel != DecodeKernel::kStream || num_seqs == 0 ||
      (plan != nullptr && plan->tile_start != nullptr && plan->num_warps >= 1 && plan->num_warps <= plan->num_tiles &&
       (plan->stages == 2 || plan->stages == 3) &&
       (plan->num_warps == 1 || (static_cast<int64_t>(plan->num_warps) * 2 <= max_partials &&
                                 d_partial_o != nullptr && d_partial_ml != nullptr)) &&
       static_cast<int64_t>(shape.num_blocks) * shape.block_heads() * shape.block_size <= 2147483647);
  if (!stream_ok) {
    throw Error("decode_attention: bad stream plan: " +
                (plan == nullptr ? std::string("none")
                                 : "warps=" + std::to_string(plan->num_warps) + " stages=" +
                                       std::to_string(plan->stages) + " tiles=" +
                                       std::to_string(plan->num_tiles) + " max_partials=" + std::to_string(max_partials)));
  }
  if (kFp8Kv<KV> && (scales.k == nullptr || scales.v == nullptr)) {
    throw Error("decode_attention: an FP8 cache needs the layer's k and v scales");
  }
  if (num_seqs == 0) return;
  const DecodeArgs<T, KV> args{d_out, d_qkv, d_k_cache, d_v_cache, d_positions, d_query_start, d_block_tables,
                               d_decode_seqs, d_partial_o, d_partial_ml, max_blocks_per_seq, shape.num_heads,
                               shape.num_kv_heads, shape.block_size, split.keys_per_split, scoring.scale_for(hd),
                               scoring.softcap, scoring.window, scales.k, scales.v, scoring.sinks,
                               shape.block_heads()};
  if (scoring.is_plain()) return launch_decode<T, false>(args, num_seqs, split, hd, kernel, plan, stream);
  launch_decode<T, true>(args, num_seqs, split, hd, kernel, plan, stream);
}

#define CBATCH_INSTANTIATE_DECODE(T, KV)                                                                    \
  template void decode_attention<T, KV>(T*, const T*, const KV*, const KV*, const int32_t*, const int32_t*,  \
                                        const int32_t*, int, const int32_t*, int, const DecodeSplit&, float*,\
                                        float*, int, const AttentionShape&, cudaStream_t, DecodeKernel,     \
                                        const DecodeStream*, const AttentionScoring&, const KvScales&);
CBATCH_INSTANTIATE_DECODE(float, float)
CBATCH_INSTANTIATE_DECODE(__nv_bfloat16, __nv_bfloat16)
CBATCH_INSTANTIATE_DECODE(__half, __half)
CBATCH_INSTANTIATE_DECODE(__nv_bfloat16, Fp8E4M3)
CBATCH_INSTANTIATE_DECODE(__half, Fp8E4M3)
#undef CBATCH_INSTANTIATE_DECODE

}  // namespace cbatch
