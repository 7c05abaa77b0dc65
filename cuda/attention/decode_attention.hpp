// Host side of the decode attention (decode_attention*.cu): the attention of single-row sequences (a
// decode token, or a one-row chunk), the bulk of every decode-heavy step. Memory-bound on the KV cache,
// so it reads each kv head's keys and values once for all the query heads that share them, spreads long
// contexts over several CTAs (split-KV) when there are too few sequences to fill the GPU, and combines
// the partial softmaxes in a second launch. Its bf16/fp16 kernels do both products on the tensor cores.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "cuda/attention/attention_shape.hpp"
#include "cuda/attention/decode_shape.hpp"
#include "cuda/attention/kv_cache_dtype.hpp"

namespace cbatch {

// How a decode launch splits each sequence's keys: CTAs per (sequence, kv head) and keys per CTA.
struct DecodeSplit {
  int num_splits = 1;
  int keys_per_split = 0;   // a multiple of kDecodeKeysPerChunk
};

// Splits so that the launch fills about `target_ctas` CTAs (never more than max_partials partial results
// in total); one split when the sequences alone fill the GPU.
DecodeSplit choose_decode_split(int num_seqs, int num_kv_heads, int max_seq_len, int target_ctas, int max_partials);

// The kernel that serves the decode rows. kStream, the default for bf16 and fp16 (head_dims for which
// decode_tensor_cores_support() holds): the tensor-core kernel scheduled as in decode_stream.hpp (each
// warp a contiguous, equal share of all the decode tiles; the products transposed so that the group's q
// heads are the mma's 8 columns); it takes a DecodeStream plan instead of the split. kTensorCores16: the
// split-KV tensor-core kernel with 16-key warp tiles, the fallback where the stream kernel's shared memory
// does not fit the GPU (at most 99 KB a CTA). kCudaCores: every dtype and head_dim (fp32, head_dim 256),
// and the reference the others are compared with. The tensor-core kernels round P to the dtype before
// P V, as the prefill kernel does; their block code is also checked on the CPU through an emulation of
// the PTX instructions (tests/cuda/test_decode_emulated.cpp). Measured on an H200 (docs/benchmarks,
// 2026-11-26): on 256-sequence batches at head_dim 128 the stream kernel read the KV cache at 0.77-0.87 of
// the copy rate, the 16-key one at 0.70-0.76, the CUDA-core one at 0.26-0.29.
enum class DecodeKernel { kCudaCores, kTensorCores16, kStream };
bool decode_tensor_cores_support(int head_dim);
// Shared memory (dynamic and static) of a CUDA-core decode CTA at head_dim over a cache of KV elements: 141
// KB in fp32 at 256.
template <typename KV>
size_t decode_cuda_cores_smem_bytes(int head_dim);

// A stream launch: tile_start (device, num_seqs + 1 entries, see decode_stream.hpp), the tiles of all
// items (tile_start[num_seqs] * num_kv_heads), the warps (decode_stream::choose_num_warps, at most
// max_partials / 2 and DecodeStreamLimits::max_warps) and the kernel's pipeline depth (2 or 3 stages).
struct DecodeStream {
  const int32_t* tile_start = nullptr;
  int64_t num_tiles = 0;
  int num_warps = 0;
  int stages = 3;
};

// The stream kernel on the current device, for the head_dim (T = bf16, fp16): the deepest pipeline up to
// max_stages whose shared memory fits (3 stages on Hopper; 2 on the A100 at head_dim 128 and on sm_86/89
// at 64), and how many of its warps run at once. Throws cbatch::Error where not even 2 stages fit
// (sm_86/89 at head_dim 128).
struct DecodeStreamLimits {
  int stages;
  int max_warps;
};
// KV: the cache element (an FP8 cache's stages are smaller, plus one converted tile pair per warp).
template <typename T, typename KV = T>
DecodeStreamLimits decode_stream_limits(int head_dim, int max_stages = 3);
// The stream kernel's shared memory per CTA at head_dim (32, 64, 128) and 2 or 3 stages.
template <typename T, typename KV = T>
size_t decode_stream_smem_bytes(int head_dim, int stages);

// For each listed sequence s = decode_seqs[i] (whose only row is r = query_start[s]) and each q head h:
// out[r, h] = softmax(q[r, h] . k[s, f..positions[r]] * scale) . v[s, f..positions[r]], with the layouts of
// paged_attention.hpp; f = 0, scale = 1 / sqrt(head_dim) and no softcap unless `scoring` says otherwise
// (attention_shape.hpp: f is the window's first key; the splits then cut positions f.., so choose the
// split over the window's keys). d_partial_o (max_partials, group, head_dim) and d_partial_ml
// (max_partials, group, 2) are scratch for split.num_splits > 1, where num_seqs * num_kv_heads *
// num_splits <= max_partials. head_dim in {16, 32, 64, 128}, and 256 for kCudaCores; num_heads /
// num_kv_heads <= kDecodeMaxGroup.
// kStream ignores split and needs plan, with 2 * plan->num_warps <= max_partials, its tile_start built for
// the same window (decode_stream::build_tile_start).
// KV: the cache element, T or (T = bf16, fp16) Fp8E4M3 with the layer's scales (kv_cache_dtype.hpp), for
// every kernel; the caches' type is never deduced (KvElement: KV is T unless named).
template <typename T, typename KV = T>
void decode_attention(T* d_out, const T* d_qkv, const KvElement<KV>* d_k_cache,
                      const KvElement<KV>* d_v_cache, const int32_t* d_positions,
                      const int32_t* d_query_start, const int32_t* d_block_tables, int max_blocks_per_seq,
                      const int32_t* d_decode_seqs, int num_seqs, const DecodeSplit& split, float* d_partial_o,
                      float* d_partial_ml, int max_partials, const AttentionShape& shape, cudaStream_t stream,
                      DecodeKernel kernel = DecodeKernel::kCudaCores, const DecodeStream* plan = nullptr,
                      const AttentionScoring& scoring = {}, const KvScales& scales = {});

}  // namespace cbatch
