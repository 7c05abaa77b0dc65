// Error checks for CUDA runtime and cuBLAS calls: CUDA_CHECK(expr), CUBLAS_CHECK(expr) and
// CUDA_CHECK_LAUNCH() (after every kernel launch) throw cbatch::Error naming the expression, the error
// string and file:line. Host-only and C++17-clean, so both .cu and .cpp files include it.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>

#include "cuda/common/cublas_library.hpp"
#include "engine/base/error.hpp"

namespace cbatch {

[[noreturn]] inline void throw_cuda_failure(const char* api, const char* expr, const char* what,
                                            const char* file, int line) {
  throw Error(std::string(api) + " error: " + expr + " failed: " + what + " (" + file + ":" +
              std::to_string(line) + ")");
}

inline void cuda_check(cudaError_t err, const char* expr, const char* file, int line) {
  if (err != cudaSuccess) throw_cuda_failure("CUDA", expr, cudaGetErrorString(err), file, line);
}

inline void cublas_check(cublasStatus_t status, const char* expr, const char* file, int line) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    throw_cuda_failure("cuBLAS", expr, cublas_library().status_string(status), file, line);
  }
}

}  // namespace cbatch

#define CUDA_CHECK(expr) ::cbatch::cuda_check((expr), #expr, __FILE__, __LINE__)
#define CUBLAS_CHECK(expr) ::cbatch::cublas_check((expr), #expr, __FILE__, __LINE__)
// A bad launch configuration surfaces at cudaGetLastError, not at the <<<>>> statement.
#define CUDA_CHECK_LAUNCH() ::cbatch::cuda_check(cudaGetLastError(), "kernel launch", __FILE__, __LINE__)
