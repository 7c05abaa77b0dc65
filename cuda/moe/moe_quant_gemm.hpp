// The experts of a sparse layer kept quantized on the device, and the grouped GEMM that dequantises them in its
// load path (moe_quant_gemm.cu, block code in moe_quant_gemm_block.cuh): GGUF blocks as the model ships them
// (MXFP4, the 32-element types, Q4_K, Q5_K and Q6_K: expert_blocks_supported), or FP8 E4M3 codes with one fp32
// scale per output row (--quantization fp8). The GEMM reads the expert offsets on the device, so a layer whose
// products all take it needs no host copy of them (moe_ffn.cpp). Compute types bf16 and fp16; fp32 keeps the
// experts in T.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "cuda/common/device_buffer.hpp"
#include "engine/model/tensor.hpp"

namespace cbatch {

enum class ExpertFormat {
  kT,       // in the compute type, multiplied by cuBLAS (moe_gemm.hpp)
  kBlocks,  // GGUF blocks of one type (ExpertMatrix::blocks), as the file stores them
  kFp8Row,  // FP8 E4M3 codes with a scale per row
};

// Whether moe_quant_gemm (and quant_blocks_gemm) reads weights in blocks of `dtype`: MXFP4, Q8_0, Q4_0, Q4_1,
// Q5_0, Q5_1, IQ4_NL and cbatch's Q4_Z, Q8_Z (an asymmetric checkpoint's codes), FP8 (an FP8 checkpoint's E4M3
// codes with their fp32 block scale) and NVFP4 (E2M1 codes, an fp32 scale per 16): 32-element blocks, k a
// multiple of 32; Q4_K, Q5_K, Q6_K (256-element superblocks, k a multiple of 256).
// Q2_K, Q3_K and IQ4_XS weights are decoded to T at load.
bool expert_blocks_supported(DType dtype, int64_t k);

// One stacked expert product, (num_experts, n, k) in `format`: expert e's matrix at e times its size.
template <typename T>
struct ExpertMatrix {
  ExpertFormat format = ExpertFormat::kT;
  DType blocks = DType::kF32;   // kBlocks: the block type
  DeviceBuffer<T> dense;        // (num_experts, n, k) in T; empty when quantized
  DeviceBuffer<uint8_t> quant;  // blocks: (num_experts, n, row_bytes(blocks, k)); FP8: (num_experts, n, k)
  DeviceBuffer<float> scales;   // (num_experts, n) FP8 row scales; else empty

  bool is_quantized() const { return format != ExpertFormat::kT; }
  size_t bytes() const { return dense.bytes() + quant.bytes() + scales.bytes(); }
};

// For each expert e: y[offsets[e] .. offsets[e + 1]) (m_e, n) = x[same rows] (m_e, k) W_e^T, W_e dequantised from w
// (blocks that expert_blocks_supported takes, or FP8 rows, k a multiple of 32). d_offsets (num_experts + 1) on the
// device, its last entry at most num_picks (the grid's bound, on the host). T bf16 or fp16.
template <typename T>
void moe_quant_gemm(T* d_y, const T* d_x, const ExpertMatrix<T>& w, const int32_t* d_offsets, int num_picks,
                    int num_experts, int n, int k, cudaStream_t stream);

// moe_quant_gemm on weights held as bytes: d_blocks (num_experts, n, row_bytes(dtype, k)) in blocks of `dtype`,
// which expert_blocks_supported(dtype, k) takes. A dense linear layer is one expert (offsets {0, m}).
template <typename T>
void quant_blocks_gemm(T* d_y, const T* d_x, DType dtype, const uint8_t* d_blocks, const int32_t* d_offsets,
                       int num_picks, int num_experts, int n, int k, cudaStream_t stream);

// quant_blocks_gemm for one expert of m rows (d_offsets {0, m}) with its k tiles split over `splits` CTAs along the
// grid's z (quant_gemm_k_splits), each writing fp32 partial sums to d_partial (splits, m, n), which one more
// kernel adds in split order and rounds to T (deterministic): a dense layer's decode, whose n alone gives too few
// CTAs. splits 1: quant_blocks_gemm (d_partial unused).
template <typename T>
void quant_blocks_gemm_split_k(T* d_y, const T* d_x, DType dtype, const uint8_t* d_blocks, const int32_t* d_offsets,
                               int m, int n, int k, int splits, float* d_partial, cudaStream_t stream);

// The splits of k that give a one-expert product of n columns about two CTAs on each of num_sms SMs: 1 where its
// n tiles already do, at most kQuantGemmMaxSplits and the k tiles, none of them empty.
constexpr int kQuantGemmMaxSplits = 8;
int quant_gemm_k_splits(int n, int k, int num_sms);

// codes (rows, cols) E4M3 and scales (rows) fp32 from x (rows, cols) T: each row's scale is its largest
// magnitude / 448 (1 for an all-zero row; +infinity for a row holding a NaN or an infinity, which the
// caller refuses), each code x / scale rounded to nearest even, saturating (engine/model/fp8.hpp).
template <typename T>
void quantize_rows_fp8(uint8_t* d_codes, float* d_scales, const T* d_x, int64_t rows, int64_t cols,
                       cudaStream_t stream);

}  // namespace cbatch
