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
// The family build (decode_args.cuh) splits the keys of the row's window and softcaps the scores.
#include "cuda/decode_attention.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>

#include "cuda/cuda_check.hpp"
#include "cuda/cuda_dtype.cuh"
#include "cuda/decode_kernels.cuh"
#include "cuda/kernel_smem.hpp"

namespace cbatch {
namespace {

using namespace decode_detail;

constexpr int kThreads = kDecodeKeysPerChunk;  // one key per thread
constexpr int kWarps = kThreads / 32;

// Two consecutive elements widened to fp32 (4- or 8-byte aligned).
__device__ __forceinline__ float2 load2_f32(const float* p) { return *reinterpret_cast<const float2*>(p); }
__device__ __forceinline__ float2 load2_f32(const __nv_bfloat16* p) {
  return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(p));
}
__device__ __forceinline__ float2 load2_f32(const __half* p) { return __half22float2(*reinterpret_cast<const __half2*>(p)); }

// Dynamic shared memory: the chunk's value rows, reused at the end for the per-key-group outputs.
template <typename T, int HD>
constexpr size_t decode_smem_bytes() {
  const size_t values = sizeof(T) * kThreads * HD;
  const size_t outputs = sizeof(float) * (kThreads / (HD / 2)) * kDecodeMaxGroup * HD;
  return values > outputs ? values : outputs;
}

template <typename T, int HD, bool FAMILY>
__global__ void __launch_bounds__(kThreads) decode_attention_kernel(const DecodeArgs<T> a) {
  constexpr int kVec = Pack16<T>::kSize;
  constexpr int kPairs = HD / 2;                                   // output dim pairs
  constexpr int kKeyGroups = kThreads / kPairs;                    // threads sharing one dim pair
  __shared__ float s_q[kDecodeMaxGroup][HD];                       // q * scale
  __shared__ float s_p[kDecodeMaxGroup][kThreads];                 // probabilities of the chunk
  __shared__ float s_red[kDecodeMaxGroup][kWarps];                 // per-warp max, then sum
  __shared__ float s_m[kDecodeMaxGroup], s_l[kDecodeMaxGroup], s_alpha[kDecodeMaxGroup];
  extern __shared__ __align__(16) unsigned char s_dynamic[];
  T* s_v = reinterpret_cast<T*>(s_dynamic);                        // (kThreads, HD) value rows of the chunk
  float* s_o = reinterpret_cast<float*>(s_dynamic);                // (kKeyGroups, group, HD) after the loop

  const DecodeCta cta = decode_cta<T, FAMILY>(a);
  const int kv_head = cta.kv_head, group = cta.group, row = cta.row;
  const int key_begin = cta.key_begin, key_end = cta.key_end;
  const int32_t* table = cta.table;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const size_t qkv_stride = static_cast<size_t>(a.num_heads + 2 * a.num_kv_heads) * HD;

  for (int i = tid; i < group * HD; i += kThreads) {
    const int g = i / HD, d = i % HD;
    s_q[g][d] = to_float(a.qkv[row * qkv_stride + static_cast<size_t>(kv_head * group + g) * HD + d]) * a.scale;
  }
  if (tid < group) {
    s_m[tid] = -INFINITY;
    s_l[tid] = 0.0f;
  }
  const int pair = tid % kPairs, key_group = tid / kPairs;
  float2 o[kDecodeMaxGroup];  // this thread's dims (2 pair, 2 pair + 1) of each head, over its keys
#pragma unroll
  for (int g = 0; g < kDecodeMaxGroup; ++g) o[g] = make_float2(0.0f, 0.0f);
  __syncthreads();

  for (int chunk = key_begin; chunk < key_end; chunk += kThreads) {
    const int key = chunk + tid;
    float s[kDecodeMaxGroup];
#pragma unroll
    for (int g = 0; g < kDecodeMaxGroup; ++g) s[g] = key < key_end ? 0.0f : -INFINITY;
    if (key < key_end) {
      const size_t offset = cache_offset(a, table, kv_head, key, HD);
      const T* k_row = a.k_cache + offset;
      // This key's value row goes to shared memory for the weighted sum below (loads issued early).
#pragma unroll
      for (int d = 0; d < HD; d += kVec) {
        *reinterpret_cast<Pack16<T>*>(s_v + tid * HD + d) = *reinterpret_cast<const Pack16<T>*>(a.v_cache + offset + d);
      }
#pragma unroll
      for (int d = 0; d < HD; d += kVec) {
        float kf[kVec];
        load_pack_f32(k_row + d, kf);
#pragma unroll
        for (int g = 0; g < kDecodeMaxGroup; ++g) {
          if (g < group) {
#pragma unroll
            for (int e = 0; e < kVec; ++e) s[g] += s_q[g][d + e] * kf[e];
          }
        }
      }
      if constexpr (FAMILY) {
#pragma unroll
        for (int g = 0; g < kDecodeMaxGroup; ++g) s[g] = softcapped(s[g], a.softcap);
      }
    }
    // Chunk max per head over the block, then the new running max and the rescale factor.
#pragma unroll
    for (int g = 0; g < kDecodeMaxGroup; ++g) {
      if (g < group) {
        const float m = warp_max(s[g]);
        if (lane == 0) s_red[g][warp] = m;
      }
    }
    __syncthreads();
    if (tid < group) {
      float m = s_m[tid];
#pragma unroll
      for (int w = 0; w < kWarps; ++w) m = fmaxf(m, s_red[tid][w]);
      s_alpha[tid] = expf(s_m[tid] - m);  // 0 on the first chunk (m was -inf), m is finite from then on
      s_m[tid] = m;
    }
    __syncthreads();
#pragma unroll
    for (int g = 0; g < kDecodeMaxGroup; ++g) {
      if (g < group) {
        const float p = key < key_end ? expf(s[g] - s_m[g]) : 0.0f;
        s_p[g][tid] = p;
        const float sum = warp_sum(p);
        if (lane == 0) s_red[g][warp] = sum;
      }
    }
    __syncthreads();
    if (tid < group) {
      float sum = 0.0f;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) sum += s_red[tid][w];
      s_l[tid] = s_l[tid] * s_alpha[tid] + sum;
    }
    // Weighted values: this thread's dim pair for every head, over keys key_group, key_group + kKeyGroups...
#pragma unroll
    for (int g = 0; g < kDecodeMaxGroup; ++g) {
      if (g < group) {
        o[g].x *= s_alpha[g];
        o[g].y *= s_alpha[g];
      }
    }
    const int num_keys = min(kThreads, key_end - chunk);
    for (int k = key_group; k < num_keys; k += kKeyGroups) {
      const float2 v = load2_f32(s_v + k * HD + 2 * pair);
#pragma unroll
      for (int g = 0; g < kDecodeMaxGroup; ++g) {
        if (g < group) {
          const float p = s_p[g][k];
          o[g].x += p * v.x;
          o[g].y += p * v.y;
        }
      }
    }
    __syncthreads();  // s_v, s_p, s_red and s_alpha are rewritten by the next chunk
  }

  // Sum the key groups' partial outputs (s_v's space is free now).
#pragma unroll
  for (int g = 0; g < kDecodeMaxGroup; ++g) {
    if (g < group) {
      s_o[(key_group * group + g) * HD + 2 * pair] = o[g].x;
      s_o[(key_group * group + g) * HD + 2 * pair + 1] = o[g].y;
    }
  }
  __syncthreads();

  const bool is_split = gridDim.z > 1;
  const size_t partial = (static_cast<size_t>(blockIdx.x) * gridDim.y + kv_head) * gridDim.z + blockIdx.z;
  for (int e = tid; e < group * HD; e += kThreads) {
    const int g = e / HD, d = e % HD;
    float sum = 0.0f;
#pragma unroll
    for (int kg = 0; kg < kKeyGroups; ++kg) sum += s_o[(kg * group + g) * HD + d];
    if (is_split) {
      a.partial_o[(partial * group + g) * HD + d] = sum;
    } else {
      a.out[static_cast<size_t>(row) * a.num_heads * HD + static_cast<size_t>(kv_head * group + g) * HD + d] =
          from_float<T>(sum / s_l[g]);
    }
  }
  if (is_split && tid < group) {
    a.partial_ml[(partial * group + tid) * 2] = s_m[tid];
    a.partial_ml[(partial * group + tid) * 2 + 1] = s_l[tid];
  }
}

// Merges the splits of one (sequence, q head): out = sum_s e^(m_s - M) o_s / sum_s e^(m_s - M) l_s.
// Grid (num_seqs, num_heads), head_dim threads. Split 0 always holds key 0, so M is finite; an empty
// split has m = -inf, l = 0 and o = 0 and adds nothing.
template <typename T>
__global__ void decode_combine_kernel(const DecodeArgs<T> a, int num_splits) {
  const int seq = a.decode_seqs[blockIdx.x];
  const int head = blockIdx.y;
  const int group = a.num_heads / a.num_kv_heads;
  const int kv_head = head / group, g = head % group;
  const int hd = blockDim.x;
  const size_t first = (static_cast<size_t>(blockIdx.x) * a.num_kv_heads + kv_head) * num_splits;
  float m = -INFINITY;
  for (int s = 0; s < num_splits; ++s) m = fmaxf(m, a.partial_ml[((first + s) * group + g) * 2]);
  float l = 0.0f, o = 0.0f;
  for (int s = 0; s < num_splits; ++s) {
    const size_t p = (first + s) * group + g;
    const float w = expf(a.partial_ml[p * 2] - m);
    l += w * a.partial_ml[p * 2 + 1];
    o += w * a.partial_o[p * hd + threadIdx.x];
  }
  const int row = a.query_start[seq];
  a.out[static_cast<size_t>(row) * a.num_heads * hd + static_cast<size_t>(head) * hd + threadIdx.x] = from_float<T>(o / l);
}

}  // namespace

namespace decode_detail {

template <typename T>
void launch_split(void (*kernel)(DecodeArgs<T>), int threads, size_t smem_bytes, const DecodeArgs<T>& args,
                  int num_seqs, int num_splits, int hd, cudaStream_t stream) {
  allow_dynamic_shared_memory(reinterpret_cast<const void*>(kernel), smem_bytes);
  const dim3 grid(static_cast<unsigned>(num_seqs), static_cast<unsigned>(args.num_kv_heads),
                  static_cast<unsigned>(num_splits));
  kernel<<<grid, threads, smem_bytes, stream>>>(args);
  CUDA_CHECK_LAUNCH();
  if (num_splits > 1) {
    decode_combine_kernel<T><<<dim3(num_seqs, args.num_heads), hd, 0, stream>>>(args, num_splits);
    CUDA_CHECK_LAUNCH();
  }
}

template void launch_split<float>(void (*)(DecodeArgs<float>), int, size_t, const DecodeArgs<float>&, int, int, int,
                                 cudaStream_t);
template void launch_split<__nv_bfloat16>(void (*)(DecodeArgs<__nv_bfloat16>), int, size_t,
                                         const DecodeArgs<__nv_bfloat16>&, int, int, int, cudaStream_t);
template void launch_split<__half>(void (*)(DecodeArgs<__half>), int, size_t, const DecodeArgs<__half>&, int, int, int,
                                  cudaStream_t);

}  // namespace decode_detail

namespace {

template <typename T, int HD, bool FAMILY>
void launch_cuda_cores(const DecodeArgs<T>& args, int num_seqs, int num_splits, cudaStream_t stream) {
  launch_split<T>(decode_attention_kernel<T, HD, FAMILY>, kThreads, decode_smem_bytes<T, HD>(), args, num_seqs,
                  num_splits, HD, stream);
}

// Launches the kernel's FAMILY build for the decode rows.
template <typename T, bool FAMILY>
void launch_decode(const DecodeArgs<T>& args, int num_seqs, const DecodeSplit& split, int hd, DecodeKernel kernel,
                   const DecodeStream* plan, cudaStream_t stream) {
  if (kernel != DecodeKernel::kCudaCores) {
    if constexpr (std::is_same_v<T, float>) {
      throw Error("decode_attention: the tensor-core kernels take bf16 or fp16");
    } else if (kernel == DecodeKernel::kStream) {
      const StreamArgs st{plan->tile_start, plan->num_tiles, plan->num_warps, num_seqs};
      return launch_stream<T, FAMILY>(args, st, plan->stages, hd, stream);
    } else if (kernel == DecodeKernel::kTensorCores16) {
      return launch_tensor_cores<T, 16, FAMILY>(args, num_seqs, split.num_splits, hd, stream);
    } else {
      return launch_tensor_cores<T, 32, FAMILY>(args, num_seqs, split.num_splits, hd, stream);
    }
  }
  switch (hd) {
    case 16: return launch_cuda_cores<T, 16, FAMILY>(args, num_seqs, split.num_splits, stream);
    case 32: return launch_cuda_cores<T, 32, FAMILY>(args, num_seqs, split.num_splits, stream);
    case 64: return launch_cuda_cores<T, 64, FAMILY>(args, num_seqs, split.num_splits, stream);
    case 128: return launch_cuda_cores<T, 128, FAMILY>(args, num_seqs, split.num_splits, stream);
    default: throw Error("decode_attention: head_dim " + std::to_string(hd) + " is not 16, 32, 64 or 128");
  }
}

}  // namespace

bool decode_tensor_cores_support(int head_dim) { return head_dim == 32 || head_dim == 64 || head_dim == 128; }

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

template <typename T>
void decode_attention(T* d_out, const T* d_qkv, const T* d_k_cache, const T* d_v_cache, const int32_t* d_positions,
                      const int32_t* d_query_start, const int32_t* d_block_tables, int max_blocks_per_seq,
                      const int32_t* d_decode_seqs, int num_seqs, const DecodeSplit& split, float* d_partial_o,
                      float* d_partial_ml, int max_partials, const AttentionShape& shape, cudaStream_t stream,
                      DecodeKernel kernel, const DecodeStream* plan, const AttentionScoring& scoring) {
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
       static_cast<int64_t>(shape.num_blocks) * shape.num_kv_heads * shape.block_size <= 2147483647);
  if (!stream_ok) {
    throw Error("decode_attention: bad stream plan: " +
                (plan == nullptr ? std::string("none")
                                 : "warps=" + std::to_string(plan->num_warps) + " stages=" +
                                       std::to_string(plan->stages) + " tiles=" +
                                       std::to_string(plan->num_tiles) + " max_partials=" + std::to_string(max_partials)));
  }
  if (num_seqs == 0) return;
  const DecodeArgs<T> args{d_out, d_qkv, d_k_cache, d_v_cache, d_positions, d_query_start, d_block_tables,
                           d_decode_seqs, d_partial_o, d_partial_ml, max_blocks_per_seq, shape.num_heads,
                           shape.num_kv_heads, shape.block_size, split.keys_per_split, scoring.scale_for(hd),
                           scoring.softcap, scoring.window};
  if (scoring.is_plain()) return launch_decode<T, false>(args, num_seqs, split, hd, kernel, plan, stream);
  launch_decode<T, true>(args, num_seqs, split, hd, kernel, plan, stream);
}

#define CBATCH_INSTANTIATE_DECODE(T)                                                                        \
  template void decode_attention<T>(T*, const T*, const T*, const T*, const int32_t*, const int32_t*,        \
                                    const int32_t*, int, const int32_t*, int, const DecodeSplit&, float*,    \
                                    float*, int, const AttentionShape&, cudaStream_t, DecodeKernel,         \
                                    const DecodeStream*, const AttentionScoring&);
CBATCH_INSTANTIATE_DECODE(float)
CBATCH_INSTANTIATE_DECODE(__nv_bfloat16)
CBATCH_INSTANTIATE_DECODE(__half)
#undef CBATCH_INSTANTIATE_DECODE

}  // namespace cbatch
