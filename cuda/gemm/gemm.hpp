// The one GEMM of the model (gemm.cpp): Y = X W^T with row-major X, W and Y, through cuBLAS.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>

namespace cbatch {

// y (m, n) TOut = x (m, k) T * w^T with w (n, k) T: a Linear layer with weight (out, in). Accumulates in
// fp32 (CUBLAS_COMPUTE_32F; fp32 inputs use no TF32). T in {float, bf16, fp16}; TOut is T, or float
// for the logits. m == 0 does nothing.
template <typename T, typename TOut>
void gemm(cublasHandle_t handle, cudaStream_t stream, TOut* d_y, const T* d_x, const T* d_w, int m, int n, int k);

}  // namespace cbatch
