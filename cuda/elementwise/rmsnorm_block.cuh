// The block code of RMSNorm fused with the residual add (rmsnorm.cu, whose header describes it). It uses no
// CUDA header of its own: include it after cuda_dtype.cuh (to_float, from_float, block_sum), or on the host
// after tests/cuda/block_emulator.hpp and then cuda_dtype.cuh, which the emulator turns into host code
// (tests/cuda/test_elementwise_emulated.cpp).
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>

namespace cbatch::rmsnorm_detail {

constexpr int kRmsnormThreads = 256;

// rows == nullptr: in-place residual update of row blockIdx.x. rows != nullptr: gather, x read-only.
// POST_NORM: delta is normalized by delta_weight before the add (delta is then never null). delta_bias
// (dim, or null) is added to delta first (gpt-oss's output-projection bias). delta_scale multiplies what is
// added (Granite's residual multiplier; 1 leaves every other model's sums as they were).
template <typename T, bool POST_NORM>
__device__ __forceinline__ void rmsnorm_residual_block(T* __restrict__ out,              // (num_rows, dim)
                                                       float* __restrict__ x,            // (.., dim)
                                                       const T* __restrict__ delta,      // (.., dim) or null
                                                       const float* __restrict__ weight,  // (dim)
                                                       const int32_t* __restrict__ rows,  // (num_rows) or null
                                                       int dim, float eps,
                                                       const float* __restrict__ delta_weight,  // (dim)
                                                       const float* __restrict__ delta_bias = nullptr,  // (dim)
                                                       float delta_scale = 1.0f) {
  const int out_row = blockIdx.x;
  const int src_row = rows != nullptr ? rows[out_row] : out_row;
  const bool write_back = rows == nullptr && delta != nullptr;
  float* xr = x + static_cast<size_t>(src_row) * dim;
  const T* dr = delta != nullptr ? delta + static_cast<size_t>(src_row) * dim : nullptr;

  // The sublayer output as it is added: delta (+ bias), or rmsnorm(delta + bias) * delta_weight.
  auto raw_delta = [&](int i) { return delta_bias != nullptr ? to_float(dr[i]) + delta_bias[i] : to_float(dr[i]); };
  float delta_inv_rms = 1.0f;
  if constexpr (POST_NORM) {
    float delta_sq = 0.0f;
    for (int i = threadIdx.x; i < dim; i += blockDim.x) {
      const float d = raw_delta(i);
      delta_sq += d * d;
    }
    delta_inv_rms = 1.0f / sqrtf(block_sum(delta_sq) / static_cast<float>(dim) + eps);
    __syncthreads();  // block_sum's shared partials are reused below
  }
  auto delta_at = [&](int i) {
    if constexpr (POST_NORM) {
      return delta_scale * (raw_delta(i) * delta_inv_rms * delta_weight[i]);
    } else {
      return delta_scale * raw_delta(i);
    }
  };

  float sum_sq = 0.0f;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) {
    float v = xr[i];
    if (dr != nullptr) {
      v += delta_at(i);
      if (write_back) xr[i] = v;  // read back below by this same thread
    }
    sum_sq += v * v;
  }
  const float inv_rms = 1.0f / sqrtf(block_sum(sum_sq) / static_cast<float>(dim) + eps);

  T* outr = out + static_cast<size_t>(out_row) * dim;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) {
    float v = xr[i];
    if (dr != nullptr && !write_back) v += delta_at(i);
    outr[i] = from_float<T>(v * inv_rms * weight[i]);
  }
}

}  // namespace cbatch::rmsnorm_detail
