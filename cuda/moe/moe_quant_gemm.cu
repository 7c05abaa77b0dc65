// The grouped GEMM over quantized expert weights (moe_quant_gemm.hpp) around its block code
// (moe_quant_gemm_block.cuh, whose header gives the tiling), and the per-row FP8 quantization of expert
// weights at load: one warp per row, its largest magnitude then its codes.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <string>

#include "cuda/common/cuda_check.hpp"
#include "cuda/common/cuda_dtype.cuh"
#include "cuda/attention/decode_kernels.cuh"
#include "cuda/gemm/fp8_quantize_block.cuh"
#include "cuda/moe/moe_quant_gemm.hpp"
#include "cuda/moe/moe_quant_gemm_block.cuh"

namespace cbatch {
namespace {

using namespace moe_quant_detail;

constexpr int kQuantRowsWarps = 8;

template <typename T, class W>
__global__ void __launch_bounds__(kQgThreads) moe_quant_gemm_kernel(const QuantGemmArgs<T, W> a) {
  extern __shared__ __align__(128) unsigned char smem[];
  moe_quant_gemm_block<T, W>(a, smem);
}

template <typename T>
__global__ void quantize_rows_fp8_kernel(uint8_t* __restrict__ codes, float* __restrict__ scales,
                                         const T* __restrict__ x, int64_t rows, int64_t cols) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kQuantRowsWarps + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;  // whole warps
  const T* xr = x + row * cols;
  float amax = 0.0f;
  for (int64_t i = lane; i < cols; i += 32) {
    const float a = fabsf(to_float(xr[i]));
    amax = a <= amax ? amax : (a == a ? a : INFINITY);  // a NaN counts as +infinity
  }
  amax = warp_max(amax);
  const float scale = amax == INFINITY ? INFINITY : fp8_detail::fp8_scale_from_amax(amax);
  if (lane == 0) scales[row] = scale;
  for (int64_t i = lane; i < cols; i += 32) codes[row * cols + i] = fp8_e4m3_from_float(to_float(xr[i]) / scale);
}

template <typename T>
__global__ void split_k_reduce_kernel(T* __restrict__ y, const float* __restrict__ partial, int splits, size_t elems) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < elems; i += stride) {
    split_k_reduce(y, partial, splits, elems, i);
  }
}

// Split k (QuantGemmArgs): `splits` CTAs along z, each of split_k_tiles k tiles, into d_partial; 1: none.
struct SplitK {
  int splits = 1;
  int k_tiles = 0;
  float* partial = nullptr;
};

template <typename T, class W>
void launch(T* d_y, const T* d_x, const W& w, const int32_t* d_offsets, int num_picks, int num_experts, int n, int k,
            cudaStream_t stream, const SplitK& split = {}) {
  const int64_t tiles = moe_quant_gemm_tiles(num_picks, num_experts);
  const dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>((n + kQgBn - 1) / kQgBn),
                  static_cast<unsigned>(split.splits));
  QuantGemmArgs<T, W> args{d_y, d_x, w, d_offsets, num_experts, n, k};
  if (split.splits > 1) {
    args.split_k_tiles = split.k_tiles;
    args.partial = split.partial;
  }
  moe_quant_gemm_kernel<T, W><<<grid, kQgThreads, moe_quant_gemm_smem_bytes<T>(), stream>>>(args);
  CUDA_CHECK_LAUNCH();
  if (split.splits <= 1) return;
  const size_t elems = static_cast<size_t>(num_picks) * static_cast<size_t>(n);
  const auto blocks = static_cast<unsigned>(std::min<size_t>((elems + 255) / 256, 4096));
  split_k_reduce_kernel<T><<<blocks, 256, 0, stream>>>(d_y, split.partial, split.splits, elems);
  CUDA_CHECK_LAUNCH();
}

void check_sizes(const char* name, int n, int k, int num_picks, int num_experts) {
  if (n <= 0 || k <= 0 || k % 32 != 0 || num_picks < 0 || num_experts <= 0 || n > 65535 * kQgBn) {
    throw Error(std::string(name) + ": bad sizes n=" + std::to_string(n) + " k=" + std::to_string(k) +
                " (a multiple of 32)");
  }
}

template <typename T>
void launch_blocks(T* d_y, const T* d_x, DType dtype, const uint8_t* q, const int32_t* d_offsets, int num_picks,
                   int num_experts, int n, int k, cudaStream_t stream, const SplitK& split = {}) {
  auto run = [&](const auto& weights) {
    launch(d_y, d_x, weights, d_offsets, num_picks, num_experts, n, k, stream, split);
  };
  switch (dtype) {
    case DType::kQ4_K: return run(KQuant45Weights<false>{q});
    case DType::kQ5_K: return run(KQuant45Weights<true>{q});
    case DType::kQ6_K: return run(Q6KWeights{q});
    default:
      return with_block_format(dtype, [&](auto format) {
        if constexpr (decltype(format)::kElems == 32) run(BlockWeights<decltype(format)>{q});
      });
  }
}

}  // namespace

bool expert_blocks_supported(DType dtype, int64_t k) {
  switch (dtype) {
    case DType::kMXFP4: case DType::kQ8_0: case DType::kQ4_0: case DType::kQ4_1: case DType::kQ5_0:
    case DType::kQ5_1: case DType::kIQ4_NL: case DType::kQ4_Z: case DType::kQ8_Z: case DType::kFP8:
    case DType::kNVFP4: return k % 32 == 0;
    case DType::kQ4_K: case DType::kQ5_K: case DType::kQ6_K: return k % 256 == 0;
    default: return false;
  }
}

template <typename T>
void quant_blocks_gemm(T* d_y, const T* d_x, DType dtype, const uint8_t* d_blocks, const int32_t* d_offsets,
                       int num_picks, int num_experts, int n, int k, cudaStream_t stream) {
  check_sizes("quant_blocks_gemm", n, k, num_picks, num_experts);
  if (!expert_blocks_supported(dtype, k) || d_blocks == nullptr) {
    throw Error("quant_blocks_gemm: weights (" + std::to_string(n) + ", " + std::to_string(k) + ") in " +
                std::string(dtype_name(dtype)) + " blocks, which it does not read");
  }
  if (num_picks == 0) return;
  launch_blocks(d_y, d_x, dtype, d_blocks, d_offsets, num_picks, num_experts, n, k, stream);
}

int quant_gemm_k_splits(int n, int k, int num_sms) {
  const int n_tiles = (n + kQgBn - 1) / kQgBn, k_tiles = (k + kQgBk - 1) / kQgBk;
  const int wanted = (2 * num_sms + n_tiles - 1) / n_tiles;  // two CTAs an SM
  const int splits = std::max(1, std::min({wanted, k_tiles, kQuantGemmMaxSplits}));
  const int per = (k_tiles + splits - 1) / splits;
  return (k_tiles + per - 1) / per;  // no empty split
}

template <typename T>
void quant_blocks_gemm_split_k(T* d_y, const T* d_x, DType dtype, const uint8_t* d_blocks, const int32_t* d_offsets,
                               int m, int n, int k, int splits, float* d_partial, cudaStream_t stream) {
  check_sizes("quant_blocks_gemm_split_k", n, k, m, 1);
  const int k_tiles = (k + kQgBk - 1) / kQgBk;
  if (!expert_blocks_supported(dtype, k) || d_blocks == nullptr || splits < 1 || splits > k_tiles ||
      (splits > 1 && d_partial == nullptr)) {
    throw Error("quant_blocks_gemm_split_k: weights (" + std::to_string(n) + ", " + std::to_string(k) + ") in " +
                std::string(dtype_name(dtype)) + " blocks, " + std::to_string(splits) + " splits");
  }
  if (m == 0) return;
  const int per = (k_tiles + splits - 1) / splits;
  launch_blocks(d_y, d_x, dtype, d_blocks, d_offsets, m, 1, n, k, stream, SplitK{(k_tiles + per - 1) / per, per,
                                                                                d_partial});
}

template <typename T>
void moe_quant_gemm(T* d_y, const T* d_x, const ExpertMatrix<T>& w, const int32_t* d_offsets, int num_picks,
                    int num_experts, int n, int k, cudaStream_t stream) {
  check_sizes("moe_quant_gemm", n, k, num_picks, num_experts);
  if (num_picks == 0) return;
  const size_t rows = static_cast<size_t>(num_experts) * static_cast<size_t>(n);
  if (w.format == ExpertFormat::kBlocks && expert_blocks_supported(w.blocks, k) &&
      w.quant.size() == rows * static_cast<size_t>(row_bytes(w.blocks, k))) {
    return launch_blocks(d_y, d_x, w.blocks, w.quant.get(), d_offsets, num_picks, num_experts, n, k, stream);
  }
  if (w.format == ExpertFormat::kFp8Row && w.quant.size() == rows * static_cast<size_t>(k) &&
      w.scales.size() == rows) {
    return launch(d_y, d_x, Fp8RowWeights{w.quant.get(), w.scales.get()}, d_offsets, num_picks, num_experts, n, k,
                  stream);
  }
  throw Error("moe_quant_gemm: the expert weights (" + std::to_string(num_experts) + ", " + std::to_string(n) +
              ", " + std::to_string(k) + ") are not in a block type it reads, nor FP8 rows");
}

template <typename T>
void quantize_rows_fp8(uint8_t* d_codes, float* d_scales, const T* d_x, int64_t rows, int64_t cols,
                       cudaStream_t stream) {
  if (rows <= 0) return;
  const auto blocks = static_cast<unsigned>((rows + kQuantRowsWarps - 1) / kQuantRowsWarps);
  quantize_rows_fp8_kernel<T><<<blocks, kQuantRowsWarps * 32, 0, stream>>>(d_codes, d_scales, d_x, rows, cols);
  CUDA_CHECK_LAUNCH();
}

template void moe_quant_gemm<__nv_bfloat16>(__nv_bfloat16*, const __nv_bfloat16*, const ExpertMatrix<__nv_bfloat16>&,
                                            const int32_t*, int, int, int, int, cudaStream_t);
template void moe_quant_gemm<__half>(__half*, const __half*, const ExpertMatrix<__half>&, const int32_t*, int, int,
                                     int, int, cudaStream_t);
template void quant_blocks_gemm<__nv_bfloat16>(__nv_bfloat16*, const __nv_bfloat16*, DType, const uint8_t*,
                                               const int32_t*, int, int, int, int, cudaStream_t);
template void quant_blocks_gemm<__half>(__half*, const __half*, DType, const uint8_t*, const int32_t*, int, int, int,
                                        int, cudaStream_t);
template void quant_blocks_gemm_split_k<__nv_bfloat16>(__nv_bfloat16*, const __nv_bfloat16*, DType, const uint8_t*,
                                                       const int32_t*, int, int, int, int, float*, cudaStream_t);
template void quant_blocks_gemm_split_k<__half>(__half*, const __half*, DType, const uint8_t*, const int32_t*, int, int,
                                                int, int, float*, cudaStream_t);
template void quantize_rows_fp8<float>(uint8_t*, float*, const float*, int64_t, int64_t, cudaStream_t);
template void quantize_rows_fp8<__nv_bfloat16>(uint8_t*, float*, const __nv_bfloat16*, int64_t, int64_t,
                                               cudaStream_t);
template void quantize_rows_fp8<__half>(uint8_t*, float*, const __half*, int64_t, int64_t, cudaStream_t);

}  // namespace cbatch
