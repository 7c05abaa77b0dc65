// Device-side pieces shared by the decode attention kernels (decode_attention.cu: the CUDA-core kernel and
// the split-KV launch; decode_attention_mma.cu: the split tensor-core kernel; decode_attention_stream.cu:
// the stream kernel): their arguments (decode_args.cuh), the cp.async / ldmatrix / mma.sync / movmatrix
// wrappers, and the launchers each file gives the dispatcher in decode_attention.cu. For .cu files only;
// the host tests replace the wrappers with tests/cuda/warp_mma_emulator.hpp.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "cuda/common/cuda_check.hpp"
#include "cuda/attention/decode_args.cuh"

namespace cbatch::decode_detail {

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
// num_kv_heads, num_splits) of `kernel`, then the merge of the splits (decode_attention.cu). FAMILY: the
// build with the softcap and the window (decode_args.cuh).
template <typename T, typename KV = T>
void launch_split(void (*kernel)(DecodeArgs<T, KV>), int threads, size_t smem_bytes, const DecodeArgs<T, KV>& args,
                  int num_seqs, int num_splits, int hd, cudaStream_t stream);
template <typename T, bool FAMILY, typename KV = T>
void launch_tensor_cores(const DecodeArgs<T, KV>& args, int num_seqs, int num_splits, int hd, cudaStream_t stream);
template <typename T, bool FAMILY, typename KV = T>
void launch_stream(const DecodeArgs<T, KV>& args, const StreamArgs& st, int stages, int hd, cudaStream_t stream);

}  // namespace cbatch::decode_detail
