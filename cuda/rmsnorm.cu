// RMSNorm fused with the residual add: x += delta (fp32 residual stream), out = rmsnorm(x) * weight in
// the compute dtype. One block of 256 threads per output row; pass 1 adds and sums squares, a block
// reduction gives 1/rms, pass 2 scales. The gather variant (final norm of the sampling rows) reads
// source row rows[i] and leaves x untouched. Layouts: x (rows, dim) fp32, delta/out (rows, dim) T.
#include "cuda/rmsnorm.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <string>

#include "cuda/cuda_check.hpp"
#include "cuda/cuda_dtype.cuh"

namespace cbatch {

constexpr int kRmsnormThreads = 256;

// rows == nullptr: in-place residual update of row blockIdx.x. rows != nullptr: gather, x read-only.
template <typename T>
__global__ void __launch_bounds__(kRmsnormThreads)
    rmsnorm_residual_kernel(T* __restrict__ out,              // (num_rows, dim)
                            float* __restrict__ x,            // (.., dim)
                            const T* __restrict__ delta,      // (.., dim) or null
                            const float* __restrict__ weight,  // (dim)
                            const int32_t* __restrict__ rows,  // (num_rows) or null
                            int dim, float eps) {
  const int out_row = blockIdx.x;
  const int src_row = rows != nullptr ? rows[out_row] : out_row;
  const bool write_back = rows == nullptr && delta != nullptr;
  float* xr = x + static_cast<size_t>(src_row) * dim;
  const T* dr = delta != nullptr ? delta + static_cast<size_t>(src_row) * dim : nullptr;

  float sum_sq = 0.0f;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) {
    float v = xr[i];
    if (dr != nullptr) {
      v += to_float(dr[i]);
      if (write_back) xr[i] = v;  // read back below by this same thread
    }
    sum_sq += v * v;
  }
  const float inv_rms = 1.0f / sqrtf(block_sum(sum_sq) / static_cast<float>(dim) + eps);

  T* outr = out + static_cast<size_t>(out_row) * dim;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) {
    float v = xr[i];
    if (dr != nullptr && !write_back) v += to_float(dr[i]);
    outr[i] = from_float<T>(v * inv_rms * weight[i]);
  }
}

static void check_rmsnorm_sizes(const char* op, int num_rows, int dim) {
  if (num_rows < 0 || dim <= 0) {
    throw Error(std::string(op) + ": bad sizes num_rows=" + std::to_string(num_rows) + " dim=" + std::to_string(dim));
  }
}

template <typename T>
void rmsnorm_residual(T* d_out, float* d_x, const T* d_delta, const float* d_weight, int num_rows, int dim,
                      float eps, cudaStream_t stream) {
  check_rmsnorm_sizes("rmsnorm_residual", num_rows, dim);
  if (num_rows == 0) return;
  rmsnorm_residual_kernel<T><<<num_rows, kRmsnormThreads, 0, stream>>>(d_out, d_x, d_delta, d_weight, nullptr,
                                                                         dim, eps);
  CUDA_CHECK_LAUNCH();
}

template <typename T>
void rmsnorm_gather(T* d_out, const float* d_x, const T* d_delta, const float* d_weight, const int32_t* d_rows,
                    int num_rows, int dim, float eps, cudaStream_t stream) {
  check_rmsnorm_sizes("rmsnorm_gather", num_rows, dim);
  if (d_rows == nullptr) throw Error("rmsnorm_gather: no row indices");
  if (num_rows == 0) return;
  // The kernel does not write x when rows are given, so dropping const here is safe.
  rmsnorm_residual_kernel<T><<<num_rows, kRmsnormThreads, 0, stream>>>(d_out, const_cast<float*>(d_x), d_delta,
                                                                         d_weight, d_rows, dim, eps);
  CUDA_CHECK_LAUNCH();
}

#define CBATCH_INSTANTIATE_RMSNORM(T)                                                                      \
  template void rmsnorm_residual<T>(T*, float*, const T*, const float*, int, int, float, cudaStream_t);  \
  template void rmsnorm_gather<T>(T*, const float*, const T*, const float*, const int32_t*, int, int, float, \
                                  cudaStream_t);
CBATCH_INSTANTIATE_RMSNORM(float)
CBATCH_INSTANTIATE_RMSNORM(__nv_bfloat16)
CBATCH_INSTANTIATE_RMSNORM(__half)
#undef CBATCH_INSTANTIATE_RMSNORM

}  // namespace cbatch
