// Linear layers of the CUDA backend (linear.cpp): a weight W (out, in) applied as y = x W^T, either in the
// compute dtype T through cuBLAS, or (--quantization fp8) as FP8 E4M3 codes with one fp32 scale per tensor
// (W ~ codes * scale) through cuBLASLt, the input quantized per call with a dynamic per-tensor scale
// (fp8_quantize.hpp), or (--cuda-kernel weights=blocks, T bf16 or fp16) in the blocks of one DType the model
// holds it in (which weights: linear_blocks.hpp): a step of at most kBlockGemmMaxRows rows multiplies the blocks
// directly (quant_blocks_gemm_split_k: one expert, k split where n gives too few CTAs), a larger one decodes
// them into the runner's scratch matrix in T (decode_blocks, the load path's decoder) and runs cuBLAS.
// LinearRunner::forward takes every kind, so the forward pass never branches on it.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cuda/common/cuda_context.hpp"
#include "cuda/common/device_buffer.hpp"
#include "cuda/gemm/fp8_gemm.hpp"
#include "engine/model/dtype.hpp"

namespace cbatch {

// The most rows a blocks weight's product takes on the block GEMM; more go through the scratch matrix and cuBLAS.
// 32 is the GEMM's row tile: up to it every weight block is read and decoded once per product (its cost is the
// blocks' bytes, a quarter to a half of T's), past it once per 32-row tile, while decode + cuBLAS costs the
// same whatever the rows (a write and a read of the matrix in T) and cuBLAS's large tiles win a prefill chunk.
constexpr int kBlockGemmMaxRows = 32;

template <typename T>
struct LinearWeight {
  int64_t out = 0;
  int64_t in = 0;
  DeviceBuffer<T> weight;        // (out, in) in T; empty when is_fp8() or is_blocks()
  DeviceBuffer<uint8_t> codes;   // (out, in) E4M3 codes; empty unless is_fp8()
  DeviceBuffer<float> scale;     // (1) per-tensor dequantization scale; empty unless is_fp8()
  DeviceBuffer<uint8_t> blocks;  // (out, row_bytes(block_type, in)) as the model stores them; empty unless is_blocks()
  DType block_type = DType::kF32;

  bool is_fp8() const { return codes.size() > 0; }
  bool is_blocks() const { return blocks.size() > 0; }
  size_t bytes() const { return weight.bytes() + codes.bytes() + scale.bytes() + blocks.bytes(); }
};

// Rows [first_row, first_row + rows) of a (fused) weight come from the model tensor `name`.
struct WeightPart {
  std::string name;
  int64_t first_row = 0;
  int64_t rows = 0;
};

// W (out, in) T, whose parts are `parts`, as an FP8 LinearWeight: one scale over the whole tensor
// (amax / 448), codes rounded as fp8.hpp rounds. Throws cbatch::Error naming the part when it holds a NaN or
// an infinity (no scale represents it). Frees `weight`; synchronizes the stream.
template <typename T>
LinearWeight<T> quantize_weight_fp8(DeviceBuffer<T> weight, int64_t out, int64_t in,
                                    const std::vector<WeightPart>& parts, cudaStream_t stream);

template <typename T>
class LinearRunner {
 public:
  // fp8: the layers it runs have FP8 weights (T bf16 or fp16); their inputs have at most max_rows rows of at
  // most max_in values. max_block_elems: out * in of the largest weight in blocks it runs (0: none), the size of
  // its scratch matrix; max_block_out: the most outputs of one (the split-k partial sums'). Without either it
  // holds nothing.
  LinearRunner(const CudaContext& context, bool fp8, int max_rows, int64_t max_in, size_t max_block_elems = 0,
               int64_t max_block_out = 0);

  // Throws cbatch::Error now if forward() could not run w (an FP8 weight cuBLASLt has no algorithm for, a
  // blocks weight past the scratch matrix or of a type the block GEMM does not read).
  void check(const LinearWeight<T>& w);

  // y (m, w.out) = x (m, w.in) W^T on the context's stream. x and y are T, 16-byte aligned.
  void forward(const LinearWeight<T>& w, T* d_y, const T* d_x, int m);

  // The device memory it holds (the scratch matrix of blocks weights, FP8 input codes).
  size_t device_bytes() const {
    return x_codes_.bytes() + x_scale_.bytes() + partials_.bytes() + dequant_.bytes() + row_offsets_.bytes() +
           split_sums_.bytes();
  }

 private:
  void forward_blocks(const LinearWeight<T>& w, T* d_y, const T* d_x, int m);

  const CudaContext& context_;
  int max_rows_ = 0;
  int64_t max_in_ = 0;
  std::unique_ptr<Fp8Gemm> fp8_gemm_;  // with fp8 weights only (opens cuBLASLt)
  DeviceBuffer<uint8_t> x_codes_;      // (max_rows, max_in) the input of the current layer in E4M3
  DeviceBuffer<float> x_scale_;        // (1) its scale
  DeviceBuffer<float> partials_;       // (kFp8PartialFloats) the amax pass's scratch
  DeviceBuffer<T> dequant_;            // (max_block_elems) a blocks weight decoded to T for a many-row product
  DeviceBuffer<int32_t> row_offsets_;  // (kBlockGemmMaxRows + 1, 2): {0, m} at 2 m, the block GEMM's one expert
  DeviceBuffer<float> split_sums_;     // (kQuantGemmMaxSplits, kBlockGemmMaxRows, max_block_out) split-k partials
  int num_sms_ = 0;                    // the device's, for the split of k
};

}  // namespace cbatch
