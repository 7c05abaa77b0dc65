// Row-major Y (m, n) = X (m, k) * W^T (W is (n, k)) through cublasGemmEx. cuBLAS is column-major, so we
// ask it for the column-major (n, m) matrix Y^T = W X^T: A = W read transposed (lda = k), B = X (ldb = k),
// C = Y (ldc = n). Compute type CUBLAS_COMPUTE_32F for every input type: fp32 accumulation, and for fp32
// inputs the handle's default math mode keeps TF32 off, so fp32 results track the CPU backend.
#include "cuda/gemm/gemm.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <string>

#include "cuda/common/cuda_check.hpp"
#include "cuda/gemm/cuda_data_type.hpp"

namespace cbatch {

template <typename T, typename TOut>
void gemm(cublasHandle_t handle, cudaStream_t stream, TOut* d_y, const T* d_x, const T* d_w, int m, int n, int k) {
  if (m < 0 || n <= 0 || k <= 0) {
    throw Error("gemm: bad sizes m=" + std::to_string(m) + " n=" + std::to_string(n) + " k=" + std::to_string(k));
  }
  if (m == 0) return;
  const float alpha = 1.0f;
  const float beta = 0.0f;
  // cublasSetStream also resets the handle's workspace to cuBLAS's own pool, so re-bind only when the
  // stream really changes (the backend binds its one stream and its workspace once, in CudaContext).
  const CublasLibrary& cublas = cublas_library();
  cudaStream_t bound = nullptr;
  CUBLAS_CHECK(cublas.get_stream(handle, &bound));
  if (bound != stream) CUBLAS_CHECK(cublas.set_stream(handle, stream));
  CUBLAS_CHECK(cublas.gemm_ex(handle, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &alpha, d_w, cuda_data_type<T>(), k, d_x,
                             cuda_data_type<T>(), k, &beta, d_y, cuda_data_type<TOut>(), n, CUBLAS_COMPUTE_32F,
                             CUBLAS_GEMM_DEFAULT));
}

template void gemm<float, float>(cublasHandle_t, cudaStream_t, float*, const float*, const float*, int, int, int);
template void gemm<__nv_bfloat16, __nv_bfloat16>(cublasHandle_t, cudaStream_t, __nv_bfloat16*,
                                                 const __nv_bfloat16*, const __nv_bfloat16*, int, int, int);
template void gemm<__nv_bfloat16, float>(cublasHandle_t, cudaStream_t, float*, const __nv_bfloat16*,
                                         const __nv_bfloat16*, int, int, int);
template void gemm<__half, __half>(cublasHandle_t, cudaStream_t, __half*, const __half*, const __half*, int, int,
                                   int);
template void gemm<__half, float>(cublasHandle_t, cudaStream_t, float*, const __half*, const __half*, int, int, int);

}  // namespace cbatch
