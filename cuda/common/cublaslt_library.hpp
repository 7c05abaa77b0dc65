// cuBLASLt, opened the first time an FP8 linear layer is made (cublaslt_library.cpp), as cuBLAS is: cbatch
// does not link it, and only --quantization fp8 needs it (cublasGemmEx has no FP8 inputs).
#pragma once
#include <cublasLt.h>

namespace cbatch {

// The cuBLASLt functions the FP8 GEMM calls, resolved from the shared library at run time.
struct CublasLtLibrary {
  decltype(&cublasLtCreate) create = nullptr;
  decltype(&cublasLtDestroy) destroy = nullptr;
  decltype(&cublasLtMatmulDescCreate) desc_create = nullptr;
  decltype(&cublasLtMatmulDescDestroy) desc_destroy = nullptr;
  decltype(&cublasLtMatmulDescSetAttribute) desc_set = nullptr;
  decltype(&cublasLtMatrixLayoutCreate) layout_create = nullptr;
  decltype(&cublasLtMatrixLayoutDestroy) layout_destroy = nullptr;
  decltype(&cublasLtMatmulPreferenceCreate) preference_create = nullptr;
  decltype(&cublasLtMatmulPreferenceDestroy) preference_destroy = nullptr;
  decltype(&cublasLtMatmulPreferenceSetAttribute) preference_set = nullptr;
  decltype(&cublasLtMatmulAlgoGetHeuristic) heuristic = nullptr;
  decltype(&cublasLtMatmul) matmul = nullptr;
  decltype(&cublasLtGetStatusString) status_string = nullptr;
};

// Opens cuBLASLt (the major version cbatch was compiled against) and resolves every function on the first
// call; later calls return the same table. Throws cbatch::Error naming the library and the loader's
// message when it cannot be opened or lacks a function.
const CublasLtLibrary& cublaslt_library();

}  // namespace cbatch
