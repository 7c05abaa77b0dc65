// The block code of the CUDA-core decode attention and of the merge of split-KV partials
// (decode_attention.cu, whose header describes them; the merge serves the tensor-core kernels too).
// It uses no CUDA header of its own: include it after cuda_dtype.cuh (to_float, from_float, load_pack_f32,
// warp_max, warp_sum) and cuda_bf16.h / cuda_fp16.h, or on the host after tests/cuda/block_emulator.hpp and
// then cuda_dtype.cuh, which the emulator turns into host code (tests/cuda/test_cuda_cores_emulated.cpp).
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "cuda/attention/decode_args.cuh"
#include "cuda/attention/decode_shape.hpp"
#include "cuda/attention/kv_cache_element.cuh"

namespace cbatch::decode_detail::cuda_cores {

constexpr int kThreads = kDecodeKeysPerChunk;  // one key per thread
constexpr int kWarps = kThreads / 32;

// Two consecutive elements widened to fp32 (4- or 8-byte aligned).
__device__ __forceinline__ float2 load2_f32(const float* p) { return *reinterpret_cast<const float2*>(p); }
__device__ __forceinline__ float2 load2_f32(const __nv_bfloat16* p) {
  return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(p));
}
__device__ __forceinline__ float2 load2_f32(const __half* p) {
  return __half22float2(*reinterpret_cast<const __half2*>(p));
}
// Two consecutive cache elements widened (FP8 codes dequantized with their scale; 2-byte aligned).
template <typename KV>
__device__ __forceinline__ float2 load2_kv_f32(const KV* p, float scale) {
  if constexpr (kFp8Kv<KV>) {
    const float2 f = fp8x2_to_float2(*reinterpret_cast<const uint16_t*>(p));
    return make_float2(f.x * scale, f.y * scale);
  } else {
    return load2_f32(p);
  }
}

// Dynamic shared memory: the chunk's value rows (cache elements KV), reused at the end for the per-key-group
// outputs.
template <typename KV, int HD>
constexpr size_t decode_smem_bytes() {
  const size_t values = sizeof(KV) * kThreads * HD;
  const size_t outputs = sizeof(float) * (kThreads / (HD / 2)) * kDecodeMaxGroup * HD;
  return values > outputs ? values : outputs;
}

// The static shared memory of cuda_cores_block (s_q, s_p, s_red, s_m, s_l, s_alpha).
template <int HD>
constexpr size_t static_smem_bytes() {
  return sizeof(float) * (kDecodeMaxGroup * HD + kDecodeMaxGroup * kThreads + kDecodeMaxGroup * kWarps +
                          3 * kDecodeMaxGroup);
}

// The shared memory of a CUDA-core decode CTA besides its dynamic value rows (static_smem_bytes).
template <int HD>
struct CudaCoresShared {
  float (&q)[kDecodeMaxGroup][HD];         // q * scale
  float (&p)[kDecodeMaxGroup][kThreads];   // probabilities of the chunk
  float (&red)[kDecodeMaxGroup][kWarps];   // per-warp max, then sum
  float (&m)[kDecodeMaxGroup];             // running max per head
  float (&l)[kDecodeMaxGroup];             // running sum per head
  float (&alpha)[kDecodeMaxGroup];         // this chunk's rescale per head
};

// The group's q vectors times the scale into shared memory (fp32), and each head's empty softmax.
template <int HD, typename T, typename KV>
__device__ __forceinline__ void load_scaled_queries(const DecodeArgs<T, KV>& a, const DecodeCta& cta, int tid,
                                                    const CudaCoresShared<HD>& sh) {
  const size_t qkv_stride = static_cast<size_t>(a.num_heads + 2 * a.num_kv_heads) * HD;
  for (int i = tid; i < cta.group * HD; i += kThreads) {
    const int g = i / HD, d = i % HD;
    sh.q[g][d] = to_float(a.qkv[cta.row * qkv_stride + static_cast<size_t>(cta.kv_head * cta.group + g) * HD + d]) *
                 a.scale;
  }
  if (tid < cta.group) {
    sh.m[tid] = -INFINITY;
    sh.l[tid] = 0.0f;
  }
}

// The thread's key of the chunk: its scores against the group's heads (softcapped in the family build;
// -inf past key_end), its value row copied to s_v_row for the weighted sum (loads issued early).
template <int HD, bool FAMILY, typename T, typename KV>
__device__ __forceinline__ void score_key(const DecodeArgs<T, KV>& a, const DecodeCta& cta, int key, float k_scale,
                                          const CudaCoresShared<HD>& sh, KV* s_v_row,
                                          float (&s)[kDecodeMaxGroup]) {
  constexpr int kVec = Pack16<KV>::kSize;  // cache elements per 16-byte load
#pragma unroll
  for (int g = 0; g < kDecodeMaxGroup; ++g) s[g] = key < cta.key_end ? 0.0f : -INFINITY;
  if (key < cta.key_end) {
    const size_t offset = cache_offset(a, cta.table, cta.kv_head, key, HD);
    const KV* k_row = a.k_cache + offset;
#pragma unroll
    for (int d = 0; d < HD; d += kVec) {
      *reinterpret_cast<Pack16<KV>*>(s_v_row + d) = *reinterpret_cast<const Pack16<KV>*>(a.v_cache + offset + d);
    }
#pragma unroll
    for (int d = 0; d < HD; d += kVec) {
      float kf[kVec];
      load_kv_pack_f32(k_row + d, kf, k_scale);
#pragma unroll
      for (int g = 0; g < kDecodeMaxGroup; ++g) {
        if (g < cta.group) {
#pragma unroll
          for (int e = 0; e < kVec; ++e) s[g] += sh.q[g][d + e] * kf[e];
        }
      }
    }
    if constexpr (FAMILY) {
#pragma unroll
      for (int g = 0; g < kDecodeMaxGroup; ++g) s[g] = softcapped(s[g], a.softcap);
    }
  }
}

// The chunk's max per head over the block, then the new running max and the rescale factor.
template <int HD>
__device__ __forceinline__ void update_chunk_max(const float (&s)[kDecodeMaxGroup], int group, int tid, int lane,
                                                 int warp, const CudaCoresShared<HD>& sh) {
#pragma unroll
  for (int g = 0; g < kDecodeMaxGroup; ++g) {
    if (g < group) {
      const float m = warp_max(s[g]);
      if (lane == 0) sh.red[g][warp] = m;
    }
  }
  __syncthreads();
  if (tid < group) {
    float m = sh.m[tid];
#pragma unroll
    for (int w = 0; w < kWarps; ++w) m = fmaxf(m, sh.red[tid][w]);
    sh.alpha[tid] = expf(sh.m[tid] - m);  // 0 on the first chunk (m was -inf), m is finite from then on
    sh.m[tid] = m;
  }
  __syncthreads();
}

// The probabilities of the thread's key into shared memory, and each head's running sum.
template <int HD>
__device__ __forceinline__ void update_chunk_sum(const float (&s)[kDecodeMaxGroup], bool valid, int group, int tid,
                                                 int lane, int warp, const CudaCoresShared<HD>& sh) {
#pragma unroll
  for (int g = 0; g < kDecodeMaxGroup; ++g) {
    if (g < group) {
      const float p = valid ? expf(s[g] - sh.m[g]) : 0.0f;
      sh.p[g][tid] = p;
      const float sum = warp_sum(p);
      if (lane == 0) sh.red[g][warp] = sum;
    }
  }
  __syncthreads();
  if (tid < group) {
    float sum = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) sum += sh.red[tid][w];
    sh.l[tid] = sh.l[tid] * sh.alpha[tid] + sum;
  }
}

// Weighted values: the thread's dim pair for every head, rescaled, plus its keys key_group, key_group +
// kKeyGroups, ... of the chunk's num_keys.
template <int HD, typename KV>
__device__ __forceinline__ void accumulate_chunk_values(const KV* s_v, int num_keys, int group, int pair,
                                                        int key_group, float v_scale, const CudaCoresShared<HD>& sh,
                                                        float2 (&o)[kDecodeMaxGroup]) {
  constexpr int kKeyGroups = kThreads / (HD / 2);  // threads sharing one dim pair
#pragma unroll
  for (int g = 0; g < kDecodeMaxGroup; ++g) {
    if (g < group) {
      o[g].x *= sh.alpha[g];
      o[g].y *= sh.alpha[g];
    }
  }
  for (int k = key_group; k < num_keys; k += kKeyGroups) {
    const float2 v = load2_kv_f32(s_v + k * HD + 2 * pair, v_scale);
#pragma unroll
    for (int g = 0; g < kDecodeMaxGroup; ++g) {
      if (g < group) {
        const float p = sh.p[g][k];
        o[g].x += p * v.x;
        o[g].y += p * v.y;
      }
    }
  }
}

// The key groups' partial outputs summed (through s_o, s_v's space, free after the loop), then written:
// out = o / l (with the sinks in the family build), or with several splits (o, m, l) for the merge.
template <int HD, bool FAMILY, typename T, typename KV>
__device__ __forceinline__ void write_cta_output(const DecodeArgs<T, KV>& a, const DecodeCta& cta, int tid, int pair,
                                                 int key_group, const float2 (&o)[kDecodeMaxGroup], float* s_o,
                                                 const CudaCoresShared<HD>& sh) {
  constexpr int kKeyGroups = kThreads / (HD / 2);
  const int kv_head = cta.kv_head, group = cta.group;
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
      a.out[static_cast<size_t>(cta.row) * a.num_heads * HD + static_cast<size_t>(kv_head * group + g) * HD + d] =
          from_float<T>(attention_output(sum, sh.m[g], sh.l[g], FAMILY ? a.sinks : nullptr, kv_head * group + g));
    }
  }
  if (is_split && tid < group) {
    a.partial_ml[(partial * group + tid) * 2] = sh.m[tid];
    a.partial_ml[(partial * group + tid) * 2 + 1] = sh.l[tid];
  }
}

// The body of decode_attention_kernel (decode_attention.cu's header): s_dynamic is the CTA's
// decode_smem_bytes<KV, HD>() of dynamic shared memory. An FP8 cache's value rows stay codes in shared
// memory (half the bytes of bf16) and are dequantized pair by pair where they are weighted.
template <typename T, int HD, bool FAMILY, typename KV = T>
__device__ __forceinline__ void cuda_cores_block(const DecodeArgs<T, KV>& a, unsigned char* s_dynamic) {
  constexpr int kPairs = HD / 2;                                   // output dim pairs
  __shared__ float s_q[kDecodeMaxGroup][HD];                       // q * scale
  __shared__ float s_p[kDecodeMaxGroup][kThreads];                 // probabilities of the chunk
  __shared__ float s_red[kDecodeMaxGroup][kWarps];                 // per-warp max, then sum
  __shared__ float s_m[kDecodeMaxGroup], s_l[kDecodeMaxGroup], s_alpha[kDecodeMaxGroup];
  KV* s_v = reinterpret_cast<KV*>(s_dynamic);                      // (kThreads, HD) value rows of the chunk
  float* s_o = reinterpret_cast<float*>(s_dynamic);                // (kKeyGroups, group, HD) after the loop
  const CudaCoresShared<HD> sh{s_q, s_p, s_red, s_m, s_l, s_alpha};

  const DecodeCta cta = decode_cta<T, FAMILY, KV>(a);
  const float k_scale = kv_scale<KV>(a.k_scale);
  const float v_scale = kv_scale<KV>(a.v_scale);
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  load_scaled_queries<HD>(a, cta, tid, sh);
  const int pair = tid % kPairs, key_group = tid / kPairs;
  float2 o[kDecodeMaxGroup];  // this thread's dims (2 pair, 2 pair + 1) of each head, over its keys
#pragma unroll
  for (int g = 0; g < kDecodeMaxGroup; ++g) o[g] = make_float2(0.0f, 0.0f);
  __syncthreads();

  for (int chunk = cta.key_begin; chunk < cta.key_end; chunk += kThreads) {
    const int key = chunk + tid;
    float s[kDecodeMaxGroup];
    score_key<HD, FAMILY>(a, cta, key, k_scale, sh, s_v + tid * HD, s);
    update_chunk_max<HD>(s, cta.group, tid, lane, warp, sh);
    update_chunk_sum<HD>(s, key < cta.key_end, cta.group, tid, lane, warp, sh);
    accumulate_chunk_values<HD>(s_v, min(kThreads, cta.key_end - chunk), cta.group, pair, key_group, v_scale, sh, o);
    __syncthreads();  // s_v, s_p, s_red and s_alpha are rewritten by the next chunk
  }
  write_cta_output<HD, FAMILY>(a, cta, tid, pair, key_group, o, s_o, sh);
}

// Merges the splits of one (sequence, q head): out = sum_s e^(m_s - M) o_s / sum_s e^(m_s - M) l_s.
// Grid (num_seqs, num_heads), head_dim threads. Split 0 always holds key 0, so M is finite; an empty
// split has m = -inf, l = 0 and o = 0 and adds nothing.
template <typename T, typename KV>
__device__ __forceinline__ void combine_block(const DecodeArgs<T, KV>& a, int num_splits) {
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
  a.out[static_cast<size_t>(row) * a.num_heads * hd + static_cast<size_t>(head) * hd + threadIdx.x] =
      from_float<T>(attention_output(o, m, l, a.sinks, head));  // the sink joins once, here
}

}  // namespace cbatch::decode_detail::cuda_cores
