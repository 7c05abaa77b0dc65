// cuBLAS, opened when the first CUDA context is made rather than when cbatch starts (cublas_library.cpp).
#pragma once
#include <cublas_v2.h>

namespace cbatch {

// The cuBLAS functions the backend calls, resolved from the shared library at run time. cbatch does not
// link cuBLAS: loading it runs cuBLASLt's static initialisers (about 80 ms and 200 MB of resident memory
// here), a cost every CPU run, `tokenize` and `inspect` would pay for nothing.
struct CublasLibrary {
  using GemmExFn = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                      const void*, const void*, cudaDataType, int, const void*, cudaDataType, int,
                                      const void*, void*, cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);

  decltype(&cublasCreate) create = nullptr;
  decltype(&cublasDestroy) destroy = nullptr;
  decltype(&cublasSetStream) set_stream = nullptr;
  decltype(&cublasGetStream) get_stream = nullptr;
  decltype(&cublasSetMathMode) set_math_mode = nullptr;
  decltype(&cublasSetWorkspace) set_workspace = nullptr;
  decltype(&cublasGetStatusString) status_string = nullptr;
  GemmExFn gemm_ex = nullptr;
#if CUBLAS_VERSION >= 120500
  // Grouped GEMMs (cuBLAS 12.5 on): null where the opened library predates them (moe_gemm.cpp then runs
  // one GEMM per expert segment).
  decltype(&cublasGemmGroupedBatchedEx) gemm_grouped_batched_ex = nullptr;
#endif
};

// Opens cuBLAS (the major version cbatch was compiled against) and resolves every function on the first
// call; later calls return the same table. Throws cbatch::Error naming the library and the loader's
// message when it cannot be opened or lacks a function.
const CublasLibrary& cublas_library();

}  // namespace cbatch
