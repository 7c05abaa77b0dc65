// LinearRunner and the FP8 weight conversion (linear.hpp). An FP8 layer's forward is two quantization
// kernels (amax, then codes and scale; the scale never leaves the device) and one cuBLASLt GEMM whose
// output lands in T where the cuBLAS GEMM's would. A blocks layer's is the block GEMM (few rows) or the
// load path's decoder into the scratch matrix then the cuBLAS GEMM (many rows).
#include "cuda/gemm/linear.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "cuda/backend/weight_convert.hpp"
#include "cuda/common/cuda_check.hpp"
#include "cuda/gemm/fp8_quantize.hpp"
#include "cuda/gemm/gemm.hpp"
#include "cuda/moe/moe_quant_gemm.hpp"

namespace cbatch {

template <typename T>
LinearWeight<T> quantize_weight_fp8(DeviceBuffer<T> weight, int64_t out, int64_t in,
                                    const std::vector<WeightPart>& parts, cudaStream_t stream) {
  DeviceBuffer<float> partials(kFp8PartialFloats);
  for (const WeightPart& part : parts) {
    const float amax = fp8_amax(weight.get() + static_cast<size_t>(part.first_row * in),
                                static_cast<size_t>(part.rows * in), partials.get(), stream);
    if (!std::isfinite(amax)) {
      throw Error("--quantization fp8: tensor '" + part.name + "' holds a NaN or an infinity, which no FP8 scale "
                  "represents");
    }
  }
  LinearWeight<T> w;
  w.out = out;
  w.in = in;
  w.codes = DeviceBuffer<uint8_t>(static_cast<size_t>(out * in));
  w.scale = DeviceBuffer<float>(1);
  fp8_quantize(w.codes.get(), w.scale.get(), weight.get(), w.codes.size(), partials.get(), stream);
  CUDA_CHECK(cudaStreamSynchronize(stream));  // before weight and partials are freed
  return w;
}

template <typename T>
LinearRunner<T>::LinearRunner(const CudaContext& context, bool fp8, int max_rows, int64_t max_in,
                              size_t max_block_elems, int64_t max_block_out)
    : context_(context), max_rows_(max_rows), max_in_(max_in), num_sms_(context.properties().multiProcessorCount) {
  if (max_block_elems > 0) {
    dequant_ = DeviceBuffer<T>(max_block_elems);
    split_sums_ = DeviceBuffer<float>(static_cast<size_t>(kQuantGemmMaxSplits) * kBlockGemmMaxRows *
                                      static_cast<size_t>(std::max<int64_t>(max_block_out, 1)));
    std::vector<int32_t> offsets(2 * (kBlockGemmMaxRows + 1));
    for (int m = 0; m <= kBlockGemmMaxRows; ++m) offsets[2 * m + 1] = m;
    row_offsets_ = DeviceBuffer<int32_t>(offsets.size());
    CUDA_CHECK(cudaMemcpy(row_offsets_.get(), offsets.data(), row_offsets_.bytes(), cudaMemcpyHostToDevice));
  }
  if (!fp8) return;
  if constexpr (std::is_same_v<T, float>) {
    throw Error("FP8 linear layers write bf16 or fp16, not fp32");  // check_options refuses this first
  } else {
    fp8_gemm_ = std::make_unique<Fp8Gemm>(context.cublas_workspace(), context.cublas_workspace_bytes());
    x_codes_ = DeviceBuffer<uint8_t>(static_cast<size_t>(max_rows) * static_cast<size_t>(max_in));
    x_scale_ = DeviceBuffer<float>(1);
    partials_ = DeviceBuffer<float>(kFp8PartialFloats);
  }
}

template <typename T>
void LinearRunner<T>::check(const LinearWeight<T>& w) {
  if (w.is_blocks()) {
    const size_t elems = static_cast<size_t>(w.out) * static_cast<size_t>(w.in);
    const size_t split_floats =
        static_cast<size_t>(kQuantGemmMaxSplits) * kBlockGemmMaxRows * static_cast<size_t>(w.out);
    if (std::is_same_v<T, float> || !expert_blocks_supported(w.block_type, w.in) || elems > dequant_.size() ||
        split_floats > split_sums_.size() ||
        w.blocks.size() != static_cast<size_t>(w.out * row_bytes(w.block_type, w.in))) {
      throw Error("linear layer: a weight (" + std::to_string(w.out) + ", " + std::to_string(w.in) + ") in " +
                  std::string(dtype_name(w.block_type)) + " blocks that this runner (scratch of " +
                  std::to_string(dequant_.size()) + " elements) cannot run");
    }
  }
  if constexpr (!std::is_same_v<T, float>) {
    if (w.is_fp8() && fp8_gemm_ != nullptr) {
      fp8_gemm_->check_supported<T>(static_cast<int>(w.out), static_cast<int>(w.in));
    }
  }
}

template <typename T>
void LinearRunner<T>::forward(const LinearWeight<T>& w, T* d_y, const T* d_x, int m) {
  const cudaStream_t stream = context_.stream();
  if (w.is_blocks()) {
    forward_blocks(w, d_y, d_x, m);
    return;
  }
  if (!w.is_fp8()) {
    gemm<T, T>(context_.cublas(), stream, d_y, d_x, w.weight.get(), m, static_cast<int>(w.out), static_cast<int>(w.in));
    return;
  }
  if constexpr (!std::is_same_v<T, float>) {
    if (fp8_gemm_ == nullptr || m > max_rows_ || w.in > max_in_) {
      throw Error("linear layer: an FP8 weight (" + std::to_string(w.out) + ", " + std::to_string(w.in) + ") on " +
                  std::to_string(m) + " rows, beyond the runner's " + std::to_string(max_rows_) + " x " +
                  std::to_string(max_in_) + (fp8_gemm_ ? "" : " (made without fp8)"));
    }
    const size_t n = static_cast<size_t>(m) * static_cast<size_t>(w.in);
    fp8_quantize(x_codes_.get(), x_scale_.get(), d_x, n, partials_.get(), stream);
    fp8_gemm_->run<T>(d_y, x_codes_.get(), x_scale_.get(), w.codes.get(), w.scale.get(), m, static_cast<int>(w.out),
                      static_cast<int>(w.in), stream);
  } else {
    throw Error("linear layer: an FP8 weight in an fp32 backend");
  }
}

template <typename T>
void LinearRunner<T>::forward_blocks(const LinearWeight<T>& w, T* d_y, const T* d_x, int m) {
  const cudaStream_t stream = context_.stream();
  const int out = static_cast<int>(w.out), in = static_cast<int>(w.in);
  if constexpr (std::is_same_v<T, float>) {
    throw Error("linear layer: a weight in blocks in an fp32 backend");
  } else {
    if (m <= 0) return;
    if (m <= kBlockGemmMaxRows && row_offsets_.size() > 0) {
      const int splits = quant_gemm_k_splits(out, in, num_sms_);
      if (static_cast<size_t>(splits) * static_cast<size_t>(m) * static_cast<size_t>(out) > split_sums_.size()) {
        throw Error("linear layer: a weight (" + std::to_string(w.out) + ", " + std::to_string(w.in) +
                    ") in blocks past the runner's split-k sums of " + std::to_string(split_sums_.size()) + " floats");
      }
      quant_blocks_gemm_split_k<T>(d_y, d_x, w.block_type, w.blocks.get(), row_offsets_.get() + 2 * m, m, out, in,
                                   splits, split_sums_.get(), stream);
      return;
    }
    const size_t elems = static_cast<size_t>(w.out) * static_cast<size_t>(w.in);
    if (elems > dequant_.size()) {
      throw Error("linear layer: a weight (" + std::to_string(w.out) + ", " + std::to_string(w.in) +
                  ") in blocks past the runner's scratch of " + std::to_string(dequant_.size()) + " elements");
    }
    decode_blocks<T>(dequant_.get(), w.blocks.get(), w.block_type, elems / dtype_block_elems(w.block_type), stream);
    gemm<T, T>(context_.cublas(), stream, d_y, d_x, dequant_.get(), m, out, in);
  }
}

#define CBATCH_INSTANTIATE_LINEAR(T)                                                                          \
  template LinearWeight<T> quantize_weight_fp8<T>(DeviceBuffer<T>, int64_t, int64_t,                          \
                                                  const std::vector<WeightPart>&, cudaStream_t);              \
  template class LinearRunner<T>;
CBATCH_INSTANTIATE_LINEAR(float)
CBATCH_INSTANTIATE_LINEAR(__nv_bfloat16)
CBATCH_INSTANTIATE_LINEAR(__half)
#undef CBATCH_INSTANTIATE_LINEAR

}  // namespace cbatch
