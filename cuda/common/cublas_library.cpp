// cublas_library(): dlopen of cuBLAS and dlsym of each function, once per process.
#include "cuda/common/cublas_library.hpp"

#include <string>

#include "cuda/common/toolkit_library.hpp"

namespace cbatch {
namespace {

CublasLibrary load() {
  void* handle = open_toolkit_library("libcublas.so." + std::to_string(CUBLAS_VER_MAJOR), "cuBLAS");
  CublasLibrary lib;
  resolve_toolkit_function(handle, "cuBLAS", CBATCH_SYMBOL_NAME(cublasCreate), lib.create);
  resolve_toolkit_function(handle, "cuBLAS", CBATCH_SYMBOL_NAME(cublasDestroy), lib.destroy);
  resolve_toolkit_function(handle, "cuBLAS", CBATCH_SYMBOL_NAME(cublasSetStream), lib.set_stream);
  resolve_toolkit_function(handle, "cuBLAS", CBATCH_SYMBOL_NAME(cublasGetStream), lib.get_stream);
  resolve_toolkit_function(handle, "cuBLAS", CBATCH_SYMBOL_NAME(cublasSetMathMode), lib.set_math_mode);
  resolve_toolkit_function(handle, "cuBLAS", CBATCH_SYMBOL_NAME(cublasSetWorkspace), lib.set_workspace);
  resolve_toolkit_function(handle, "cuBLAS", CBATCH_SYMBOL_NAME(cublasGetStatusString), lib.status_string);
  // cublasGemmEx is overloaded in C++ (an inline wrapper takes a cudaDataType compute type); GemmExFn is
  // the exported one, which this cast would fail to compile against if its declaration changed.
  static_assert(sizeof(static_cast<CublasLibrary::GemmExFn>(&cublasGemmEx)) > 0);
  resolve_toolkit_function(handle, "cuBLAS", CBATCH_SYMBOL_NAME(cublasGemmEx), lib.gemm_ex);
#if CUBLAS_VERSION >= 120500
  lib.gemm_grouped_batched_ex = reinterpret_cast<decltype(lib.gemm_grouped_batched_ex)>(
      find_toolkit_symbol(handle, CBATCH_SYMBOL_NAME(cublasGemmGroupedBatchedEx)));  // optional: null if absent
#endif
  return lib;
}

}  // namespace

const CublasLibrary& cublas_library() {
  static const CublasLibrary lib = load();  // a failed load throws and is tried again by the next call
  return lib;
}

}  // namespace cbatch
