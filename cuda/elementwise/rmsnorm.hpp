// Host launchers of the RMSNorm family (rmsnorm.cu).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace cbatch {

// For every row r < num_rows: x[r] += delta[r] (skipped when d_delta is null), then
// out[r] = x[r] / sqrt(mean(x[r]^2) + eps) * weight. x (num_rows, dim) fp32 residual stream (updated in
// place), delta (num_rows, dim) T, weight (dim) fp32, out (num_rows, dim) T.
// d_delta_weight (dim) fp32, when given (Gemma's sandwich norms: the post-attention or post-FFN norm of
// the sublayer whose output delta is), normalizes delta before the add: x[r] += rmsnorm(delta[r]) *
// delta_weight, in fp32, with the same eps. It needs d_delta. d_delta_bias (dim) fp32, when given (gpt-oss's
// output-projection bias), is added to delta[r] in fp32 before anything else. It needs d_delta.
// delta_scale multiplies what is added, x[r] += delta_scale * delta[r] (Granite's residual multiplier).
template <typename T>
void rmsnorm_residual(T* d_out, float* d_x, const T* d_delta, const float* d_weight, int num_rows, int dim,
                      float eps, cudaStream_t stream, const float* d_delta_weight = nullptr,
                      const float* d_delta_bias = nullptr, float delta_scale = 1.0f);

// The final norm of the sampling rows: out[i] = rmsnorm(x[rows[i]] + delta[rows[i]]) * weight for
// i < num_rows (delta skipped when null; normalized by d_delta_weight first when given, as above). x is
// read, not updated. out (num_rows, dim) T.
template <typename T>
void rmsnorm_gather(T* d_out, const float* d_x, const T* d_delta, const float* d_weight, const int32_t* d_rows,
                    int num_rows, int dim, float eps, cudaStream_t stream, const float* d_delta_weight = nullptr,
                    float delta_scale = 1.0f);

}  // namespace cbatch
