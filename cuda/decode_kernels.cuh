// Device-side pieces shared by the decode attention kernels (decode_attention.cu: the CUDA-core kernel and
// the split-KV launch; decode_attention_mma.cu: the tensor-core kernel; decode_attention_stream.cu: the
// stream kernel): their arguments, the paged-cache addressing, the cp.async / ldmatrix / mma.sync /
// movmatrix wrappers, and the launchers each file gives the dispatcher in decode_attention.cu. For .cu
// files only. Cache layout (num_blocks, num_kv_heads, block_size, head_dim), as in paged_attention.hpp.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "cuda/cuda_check.hpp"
#include "cuda/decode_attention.hpp"

namespace cbatch::decode_detail {

constexpr int kMmaWarps = 4;  // warps per CTA of the tensor-core kernels

template <typename T>
struct DecodeArgs {
  T* out;                       // (num_tokens, num_heads * hd)
  const T* qkv;                 // (num_tokens, (num_heads + 2 * num_kv_heads) * hd)
  const T* k_cache;             // (num_blocks, num_kv_heads, block_size, hd)
  const T* v_cache;             // (num_blocks, num_kv_heads, block_size, hd)
  const int32_t* positions;     // (num_tokens)
  const int32_t* query_start;   // (num_seqs_in_batch + 1)
  const int32_t* block_tables;  // (num_seqs_in_batch, max_blocks_per_seq)
  const int32_t* decode_seqs;   // (num_seqs) batch sequence index of each decode row
  float* partial_o;             // (num_seqs * num_kv_heads * num_splits, group, hd) when split;
                                // (2 * num_warps, group, hd) for the stream kernel
  float* partial_ml;            // the same partials' (m, l): (.., group, 2)
  int max_blocks_per_seq;
  int num_heads;
  int num_kv_heads;
  int block_size;
  int keys_per_split;
  float scale;
};

template <typename T>
__device__ __forceinline__ size_t cache_offset(const DecodeArgs<T>& a, const int32_t* table, int kv_head, int pos,
                                               int hd) {
  const size_t block = static_cast<size_t>(table[pos / a.block_size]);
  return ((block * a.num_kv_heads + kv_head) * a.block_size + pos % a.block_size) * hd;
}

// What one CTA of either decode kernel covers: the only row `row` of sequence decode_seqs[blockIdx.x],
// kv head blockIdx.y (and its `group` q heads), keys [key_begin, key_end) of split blockIdx.z.
struct DecodeCta {
  int kv_head, group, row, key_begin, key_end;
  const int32_t* table;  // the sequence's block table
};

template <typename T>
__device__ __forceinline__ DecodeCta decode_cta(const DecodeArgs<T>& a) {
  const int seq = a.decode_seqs[blockIdx.x];
  DecodeCta c;
  c.kv_head = blockIdx.y;
  c.group = a.num_heads / a.num_kv_heads;
  c.row = a.query_start[seq];
  c.key_begin = blockIdx.z * a.keys_per_split;
  c.key_end = min(a.positions[c.row] + 1, c.key_begin + a.keys_per_split);
  c.table = a.block_tables + static_cast<size_t>(seq) * a.max_blocks_per_seq;
  return c;
}

__device__ __forceinline__ uint32_t smem_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared through cp.async (L1 bypassed); src_bytes 0 writes zeros instead.
__device__ __forceinline__ void cp_async16_zfill(void* smem, const void* gmem, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_address(smem)), "l"(gmem),
               "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* row_address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_address(row_address)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* row_address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_address(row_address)));
}

// c += A B for one m16n8k16 tile: A in registers a0 (rows 0-7, k 0-7), a1 (rows 8-15, k 0-7), a2 (rows
// 0-7, k 8-15), a3 (rows 8-15, k 8-15); B in b0 (k 0-7), b1 (k 8-15).
template <typename T>
__device__ __forceinline__ void mma_16816(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                          uint32_t b0, uint32_t b1) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  }
}
// The same with A's rows 8..15 zero (registers a1, a3).
template <typename T>
__device__ __forceinline__ void mma_16816(float (&c)[4], uint32_t a0, uint32_t a2, uint32_t b0, uint32_t b1) {
  mma_16816<T>(c, a0, 0u, a2, 0u, b0, b1);
}

// Two fp32 values as one register of T pairs, the first in the low half.
template <typename T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&v);
  } else {
    const __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&v);
  }
}

__device__ __forceinline__ uint32_t movmatrix_trans(uint32_t x) {
  uint32_t y;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(y) : "r"(x));
  return y;
}

// What a stream launch covers (decode_stream.hpp): the tile list of the decode items and its warps.
struct StreamArgs {
  const int32_t* tile_start;  // (num_seqs + 1)
  int64_t num_tiles;
  int num_warps;
  int num_seqs;
};

// Head dims with a tensor-core kernel, as a compile-time constant for f.
template <typename F>
void with_tensor_core_head_dim(int hd, F&& f) {
  switch (hd) {
    case 32: return f(std::integral_constant<int, 32>{});
    case 64: return f(std::integral_constant<int, 64>{});
    case 128: return f(std::integral_constant<int, 128>{});
    default: throw Error("decode_attention: no tensor-core kernel for head_dim " + std::to_string(hd));
  }
}

// Launchers, each defined (and instantiated) in the file of its kernel. launch_split: grid (num_seqs,
// num_kv_heads, num_splits) of `kernel`, then the merge of the splits (decode_attention.cu).
template <typename T>
void launch_split(void (*kernel)(DecodeArgs<T>), int threads, size_t smem_bytes, const DecodeArgs<T>& args,
                  int num_seqs, int num_splits, int hd, cudaStream_t stream);
template <typename T, int TILE>
void launch_tensor_cores(const DecodeArgs<T>& args, int num_seqs, int num_splits, int hd, cudaStream_t stream);
template <typename T>
void launch_stream(const DecodeArgs<T>& args, const StreamArgs& st, int hd, cudaStream_t stream);

}  // namespace cbatch::decode_detail
