// Grouped expert GEMMs. cuBLAS's grouped GEMM takes per-group sizes on the host, so the layer's expert
// offsets must be on the host first (moe_ffn.cpp copies them, one small copy and sync per sparse layer).
// Experts with the same number of rows form one group (a decode step's experts mostly hold one row each,
// so most steps are a handful of groups); each problem's matrices are in a pointer table uploaded before the
// call. Row-major as gemm.cpp: cuBLAS computes the column-major Y^T = W X^T, fp32 accumulation, no TF32.
// Without grouped GEMMs (cuBLAS before 12.5, or --cuda-kernel moe-gemm=loop) each non-empty segment is one
// gemm() call.
#include "cuda/moe/moe_gemm.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <string>
#include <utility>

#include "cuda/common/cublas_library.hpp"
#include "cuda/common/cuda_check.hpp"
#include "cuda/gemm/cuda_data_type.hpp"
#include "cuda/gemm/gemm.hpp"

namespace cbatch {
namespace {

bool grouped_gemm_available() {
#if CUBLAS_VERSION >= 120500
  return cublas_library().gemm_grouped_batched_ex != nullptr;
#else
  return false;
#endif
}

}  // namespace

template <typename T>
ExpertGemm<T>::ExpertGemm(int num_experts, bool grouped)
    : num_experts_(num_experts),
      grouped_(grouped && grouped_gemm_available()),
      host_ptrs_(grouped_ ? 6 * static_cast<size_t>(num_experts) : 0),
      ptrs_(grouped_ ? 6 * static_cast<size_t>(num_experts) : 0) {}

template <typename T>
void ExpertGemm<T>::run(cublasHandle_t handle, cudaStream_t stream, const int32_t* offsets, T* d_y, const T* d_x,
                        const T* d_w, int n, int k, int table) {
  if (n <= 0 || k <= 0 || table < 0 || table > 1) {
    throw Error("expert gemm: bad sizes n=" + std::to_string(n) + " k=" + std::to_string(k) + " table=" +
                std::to_string(table));
  }
  if (grouped_) return run_grouped(handle, stream, offsets, d_y, d_x, d_w, n, k, table);
  for (int e = 0; e < num_experts_; ++e) {
    const int m = offsets[e + 1] - offsets[e];
    if (m == 0) continue;
    gemm<T, T>(handle, stream, d_y + static_cast<size_t>(offsets[e]) * n, d_x + static_cast<size_t>(offsets[e]) * k,
               d_w + static_cast<size_t>(e) * n * k, m, n, k);
  }
}

template <typename T>
void ExpertGemm<T>::run_grouped(cublasHandle_t handle, cudaStream_t stream, const int32_t* offsets, T* d_y,
                                const T* d_x, const T* d_w, int n, int k, int table) {
#if CUBLAS_VERSION >= 120500
  std::vector<std::pair<int, int>> picked;  // (rows, expert) of the non-empty experts, by rows
  for (int e = 0; e < num_experts_; ++e) {
    if (offsets[e + 1] > offsets[e]) picked.emplace_back(offsets[e + 1] - offsets[e], e);
  }
  if (picked.empty()) return;
  std::stable_sort(picked.begin(), picked.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  const size_t count = picked.size(), experts = static_cast<size_t>(num_experts_);
  void** host = host_ptrs_.get() + table * 3 * experts;
  group_rows_.clear();
  group_size_.clear();
  for (size_t p = 0; p < count; ++p) {
    const auto [m, e] = picked[p];
    host[p] = const_cast<T*>(d_w + static_cast<size_t>(e) * n * k);
    host[experts + p] = const_cast<T*>(d_x + static_cast<size_t>(offsets[e]) * k);
    host[2 * experts + p] = d_y + static_cast<size_t>(offsets[e]) * n;
    if (group_rows_.empty() || group_rows_.back() != m) group_rows_.push_back(m), group_size_.push_back(0);
    ++group_size_.back();
  }
  void** device = ptrs_.get() + table * 3 * experts;
  CUDA_CHECK(cudaMemcpyAsync(device, host, 3 * experts * sizeof(void*), cudaMemcpyHostToDevice, stream));
  const size_t groups = group_rows_.size();
  const std::vector<cublasOperation_t> trans_w(groups, CUBLAS_OP_T), trans_x(groups, CUBLAS_OP_N);
  const std::vector<int> ns(groups, n), ks(groups, k), ldy(groups, n);
  const std::vector<float> alpha(groups, 1.0f), beta(groups, 0.0f);
  const CublasLibrary& cublas = cublas_library();
  cudaStream_t bound = nullptr;
  CUBLAS_CHECK(cublas.get_stream(handle, &bound));
  if (bound != stream) CUBLAS_CHECK(cublas.set_stream(handle, stream));
  CUBLAS_CHECK(cublas.gemm_grouped_batched_ex(
      handle, trans_w.data(), trans_x.data(), ns.data(), group_rows_.data(), ks.data(), alpha.data(),
      const_cast<const void* const*>(device), cuda_data_type<T>(), ks.data(),
      const_cast<const void* const*>(device + experts), cuda_data_type<T>(), ks.data(), beta.data(),
      device + 2 * experts, cuda_data_type<T>(), ldy.data(), static_cast<int>(groups), group_size_.data(),
      CUBLAS_COMPUTE_32F));
#else
  (void)handle, (void)stream, (void)offsets, (void)d_y, (void)d_x, (void)d_w, (void)n, (void)k, (void)table;
  throw Error("expert gemm: this cuBLAS has no grouped GEMM");
#endif
}

template class ExpertGemm<float>;
template class ExpertGemm<__nv_bfloat16>;
template class ExpertGemm<__half>;

}  // namespace cbatch
