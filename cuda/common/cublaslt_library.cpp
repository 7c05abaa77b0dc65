// cublaslt_library(): dlopen of cuBLASLt and dlsym of each function, once per process.
#include "cuda/common/cublaslt_library.hpp"

#include <string>

#include "cuda/common/toolkit_library.hpp"

namespace cbatch {
namespace {

CublasLtLibrary load() {
  const std::string what = "cuBLASLt";
  void* handle = open_toolkit_library("libcublasLt.so." + std::to_string(CUBLAS_VER_MAJOR), what);
  CublasLtLibrary lib;
  resolve_toolkit_function(handle, what, CBATCH_SYMBOL_NAME(cublasLtCreate), lib.create);
  resolve_toolkit_function(handle, what, CBATCH_SYMBOL_NAME(cublasLtDestroy), lib.destroy);
  resolve_toolkit_function(handle, what, CBATCH_SYMBOL_NAME(cublasLtMatmulDescCreate), lib.desc_create);
  resolve_toolkit_function(handle, what, CBATCH_SYMBOL_NAME(cublasLtMatmulDescDestroy), lib.desc_destroy);
  resolve_toolkit_function(handle, what, CBATCH_SYMBOL_NAME(cublasLtMatmulDescSetAttribute), lib.desc_set);
  resolve_toolkit_function(handle, what, CBATCH_SYMBOL_NAME(cublasLtMatrixLayoutCreate), lib.layout_create);
  resolve_toolkit_function(handle, what, CBATCH_SYMBOL_NAME(cublasLtMatrixLayoutDestroy), lib.layout_destroy);
  resolve_toolkit_function(handle, what, CBATCH_SYMBOL_NAME(cublasLtMatmulPreferenceCreate), lib.preference_create);
  resolve_toolkit_function(handle, what, CBATCH_SYMBOL_NAME(cublasLtMatmulPreferenceDestroy), lib.preference_destroy);
  resolve_toolkit_function(handle, what, CBATCH_SYMBOL_NAME(cublasLtMatmulPreferenceSetAttribute), lib.preference_set);
  resolve_toolkit_function(handle, what, CBATCH_SYMBOL_NAME(cublasLtMatmulAlgoGetHeuristic), lib.heuristic);
  resolve_toolkit_function(handle, what, CBATCH_SYMBOL_NAME(cublasLtMatmul), lib.matmul);
  resolve_toolkit_function(handle, what, CBATCH_SYMBOL_NAME(cublasLtGetStatusString), lib.status_string);
  return lib;
}

}  // namespace

const CublasLtLibrary& cublaslt_library() {
  static const CublasLtLibrary lib = load();  // a failed load throws and is tried again by the next call
  return lib;
}

}  // namespace cbatch
