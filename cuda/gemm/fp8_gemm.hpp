// The FP8 GEMM of --quantization fp8 (fp8_gemm.cpp): Y = (X * x_scale) (W * w_scale)^T with X (m, k) and
// W (n, k) in E4M3 codes and one fp32 scale each (device pointers), Y (m, n) in bf16 or fp16, through
// cuBLASLt with fp32 accumulation. Row-major like gemm.hpp.
#pragma once
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>

#include "cuda/common/device_buffer.hpp"

namespace cbatch {

// Throws cbatch::Error naming tensor `name` when a weight of shape (rows, cols) cannot be an operand of the
// FP8 GEMM: cuBLASLt's FP8 kernels need both dimensions of the weight (n and k) to be multiples of 16.
void check_fp8_weight_shape(const std::string& name, int64_t rows, int64_t cols);

class Fp8Gemm {
 public:
  // Opens cuBLASLt; d_workspace (workspace_bytes) is scratch shared with whatever else runs on the
  // streams this GEMM is given (stream order keeps the uses apart).
  Fp8Gemm(void* d_workspace, size_t workspace_bytes);
  ~Fp8Gemm();
  Fp8Gemm(const Fp8Gemm&) = delete;
  Fp8Gemm& operator=(const Fp8Gemm&) = delete;

  // y (m, n) TOut = (x (m, k) * *d_x_scale) (w (n, k) * *d_w_scale)^T, TOut in {bf16, fp16}. n and k must
  // be multiples of 16 and every matrix 16-byte aligned; m == 0 does nothing.
  // Asks cuBLASLt for an algorithm of an (n, k) weight writing TOut (at m = 1) now, so that a GPU or library
  // without one fails at load, not in the first step; throws cbatch::Error naming the sizes and the type.
  template <typename TOut>
  void check_supported(int n, int k);

  template <typename TOut>
  void run(TOut* d_y, const uint8_t* d_x, const float* d_x_scale, const uint8_t* d_w, const float* d_w_scale, int m,
           int n, int k, cudaStream_t stream);

 private:
  struct Plan;                                        // layouts and the heuristic's algorithm of one shape
  using PlanKey = std::tuple<int, int, int, int>;     // (output cudaDataType_t, m, n, k)
  const Plan& plan(int out_type, int m, int n, int k);
  void release() noexcept;

  void* workspace_;
  size_t workspace_bytes_;
  cublasLtHandle_t handle_ = nullptr;
  cublasLtMatmulDesc_t desc_ = nullptr;               // TN, fp32 compute and scale; scale pointers set per call
  DeviceBuffer<float> unit_scale_{1};                 // 1.0f: the scale pointers before the first call
  cublasLtMatmulPreference_t preference_ = nullptr;   // workspace limit, 16-byte alignment
  std::map<PlanKey, std::unique_ptr<Plan>> plans_;    // one per shape seen: the heuristic query costs tens of us
};

}  // namespace cbatch
