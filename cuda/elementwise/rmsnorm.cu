// RMSNorm fused with the residual add: x += delta (fp32 residual stream), out = rmsnorm(x) * weight in
// the compute dtype. One block of 256 threads per output row; pass 1 adds and sums squares, a block
// reduction gives 1/rms, pass 2 scales. The gather variant (final norm of the sampling rows) reads
// source row rows[i] and leaves x untouched. The sandwich build (Gemma) first normalizes delta by its own
// weight (a reduction of its own before pass 1), as the CPU's add_sublayer_output does; Llama's build has
// no such pass. Layouts: x (rows, dim) fp32, delta/out (rows, dim) T. The block code is in rmsnorm_block.cuh.
#include "cuda/elementwise/rmsnorm.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <string>

#include "cuda/common/cuda_check.hpp"
#include "cuda/common/cuda_dtype.cuh"
#include "cuda/elementwise/rmsnorm_block.cuh"

namespace cbatch {

using namespace rmsnorm_detail;

template <typename T, bool POST_NORM>
__global__ void __launch_bounds__(kRmsnormThreads)
    rmsnorm_residual_kernel(T* __restrict__ out,              // (num_rows, dim)
                            float* __restrict__ x,            // (.., dim)
                            const T* __restrict__ delta,      // (.., dim) or null
                            const float* __restrict__ weight,  // (dim)
                            const int32_t* __restrict__ rows,  // (num_rows) or null
                            int dim, float eps,
                            const float* __restrict__ delta_weight,  // (dim) when POST_NORM
                            const float* __restrict__ delta_bias,  // (dim) or null
                            float delta_scale) {
  rmsnorm_residual_block<T, POST_NORM>(out, x, delta, weight, rows, dim, eps, delta_weight, delta_bias, delta_scale);
}

static void check_rmsnorm_sizes(const char* op, int num_rows, int dim, const void* d_delta,
                                const float* d_delta_weight, const float* d_delta_bias = nullptr) {
  if (num_rows < 0 || dim <= 0) {
    throw Error(std::string(op) + ": bad sizes num_rows=" + std::to_string(num_rows) + " dim=" + std::to_string(dim));
  }
  if (d_delta_weight != nullptr && d_delta == nullptr) {
    throw Error(std::string(op) + ": a post-norm weight without a delta to normalize");
  }
  if (d_delta_bias != nullptr && d_delta == nullptr) throw Error(std::string(op) + ": a delta bias without a delta");
}

template <typename T>
static void launch_rmsnorm(T* d_out, float* d_x, const T* d_delta, const float* d_weight, const int32_t* d_rows,
                           int num_rows, int dim, float eps, const float* d_delta_weight, cudaStream_t stream,
                           const float* d_delta_bias, float delta_scale) {
  if (d_delta_weight != nullptr) {
    rmsnorm_residual_kernel<T, true><<<num_rows, kRmsnormThreads, 0, stream>>>(d_out, d_x, d_delta, d_weight, d_rows,
                                                                                 dim, eps, d_delta_weight,
                                                                                 d_delta_bias, delta_scale);
  } else {
    rmsnorm_residual_kernel<T, false><<<num_rows, kRmsnormThreads, 0, stream>>>(d_out, d_x, d_delta, d_weight, d_rows,
                                                                                  dim, eps, nullptr, d_delta_bias,
                                                                                  delta_scale);
  }
  CUDA_CHECK_LAUNCH();
}

template <typename T>
void rmsnorm_residual(T* d_out, float* d_x, const T* d_delta, const float* d_weight, int num_rows, int dim,
                      float eps, cudaStream_t stream, const float* d_delta_weight, const float* d_delta_bias,
                      float delta_scale) {
  check_rmsnorm_sizes("rmsnorm_residual", num_rows, dim, d_delta, d_delta_weight, d_delta_bias);
  if (num_rows == 0) return;
  launch_rmsnorm<T>(d_out, d_x, d_delta, d_weight, nullptr, num_rows, dim, eps, d_delta_weight, stream, d_delta_bias,
                    delta_scale);
}

template <typename T>
void rmsnorm_gather(T* d_out, const float* d_x, const T* d_delta, const float* d_weight, const int32_t* d_rows,
                    int num_rows, int dim, float eps, cudaStream_t stream, const float* d_delta_weight,
                    float delta_scale) {
  check_rmsnorm_sizes("rmsnorm_gather", num_rows, dim, d_delta, d_delta_weight);
  if (d_rows == nullptr) throw Error("rmsnorm_gather: no row indices");
  if (num_rows == 0) return;
  // The kernel does not write x when rows are given, so dropping const here is safe.
  launch_rmsnorm<T>(d_out, const_cast<float*>(d_x), d_delta, d_weight, d_rows, num_rows, dim, eps, d_delta_weight,
                    stream, nullptr, delta_scale);
}

#define CBATCH_INSTANTIATE_RMSNORM(T)                                                                      \
  template void rmsnorm_residual<T>(T*, float*, const T*, const float*, int, int, float, cudaStream_t,    \
                                    const float*, const float*, float);                                  \
  template void rmsnorm_gather<T>(T*, const float*, const T*, const float*, const int32_t*, int, int, float, \
                                  cudaStream_t, const float*, float);
CBATCH_INSTANTIATE_RMSNORM(float)
CBATCH_INSTANTIATE_RMSNORM(__nv_bfloat16)
CBATCH_INSTANTIATE_RMSNORM(__half)
#undef CBATCH_INSTANTIATE_RMSNORM

}  // namespace cbatch
