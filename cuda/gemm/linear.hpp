// Linear layers of the CUDA backend (linear.cpp): a weight W (out, in) applied as y = x W^T, either in the
// compute dtype T through cuBLAS, or (--quantization fp8) as FP8 E4M3 codes with one fp32 scale per tensor
// (W ~ codes * scale) through cuBLASLt, the input quantized per call with a dynamic per-tensor scale
// (fp8_quantize.hpp). LinearRunner::forward takes either kind, so the forward pass never branches on it.
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

namespace cbatch {

template <typename T>
struct LinearWeight {
  int64_t out = 0;
  int64_t in = 0;
  DeviceBuffer<T> weight;       // (out, in) in T; empty when is_fp8()
  DeviceBuffer<uint8_t> codes;  // (out, in) E4M3 codes; empty unless is_fp8()
  DeviceBuffer<float> scale;    // (1) per-tensor dequantization scale; empty unless is_fp8()

  bool is_fp8() const { return codes.size() > 0; }
  size_t bytes() const { return weight.bytes() + codes.bytes() + scale.bytes(); }
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
  // most max_in values. Without fp8 it holds nothing.
  LinearRunner(const CudaContext& context, bool fp8, int max_rows, int64_t max_in);

  // Throws cbatch::Error now if forward() could not run w (an FP8 weight cuBLASLt has no algorithm for).
  void check(const LinearWeight<T>& w);

  // y (m, w.out) = x (m, w.in) W^T on the context's stream. x and y are T, 16-byte aligned.
  void forward(const LinearWeight<T>& w, T* d_y, const T* d_x, int m);

 private:
  const CudaContext& context_;
  int max_rows_ = 0;
  int64_t max_in_ = 0;
  std::unique_ptr<Fp8Gemm> fp8_gemm_;  // with fp8 weights only (opens cuBLASLt)
  DeviceBuffer<uint8_t> x_codes_;      // (max_rows, max_in) the input of the current layer in E4M3
  DeviceBuffer<float> x_scale_;        // (1) its scale
  DeviceBuffer<float> partials_;       // (kFp8PartialFloats) the amax pass's scratch
};

}  // namespace cbatch
