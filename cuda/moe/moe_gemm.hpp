// The grouped expert GEMMs of a sparse layer (moe_gemm.cpp): every expert that rows picked multiplies its
// segment of the permuted rows by its weight; experts no row picked are not touched.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "cuda/common/device_buffer.hpp"

namespace cbatch {

template <typename T>
class ExpertGemm {
 public:
  // Tables for num_experts experts; grouped = false (--cuda-kernel moe-gemm=loop) runs one cublasGemmEx per
  // segment even where cuBLAS has grouped GEMMs (to compare the two).
  ExpertGemm(int num_experts, bool grouped);

  // For each expert e with m_e = offsets[e + 1] - offsets[e] > 0 (offsets (num_experts + 1) on the host):
  // y[offsets[e] ..] (m_e, n) = x[offsets[e] ..] (m_e, k) W_e^T with W_e = w + e * n * k (w (experts, n, k)).
  // `table` (0 or 1) picks the pointer table: the two GEMMs of a layer use different ones, since their
  // uploads may still be in flight; the layer's next sync (its offsets' copy) frees both.
  void run(cublasHandle_t handle, cudaStream_t stream, const int32_t* offsets, T* d_y, const T* d_x, const T* d_w,
           int n, int k, int table);

  bool is_grouped() const { return grouped_; }

 private:
  void run_grouped(cublasHandle_t handle, cudaStream_t stream, const int32_t* offsets, T* d_y, const T* d_x,
                   const T* d_w, int n, int k, int table);

  int num_experts_;
  bool grouped_;                    // cuBLAS has cublasGemmGroupedBatchedEx and the loop was not asked for
  PinnedBuffer<void*> host_ptrs_;   // (2 tables, 3 (w, x, y), num_experts) each table's problems' matrices
  DeviceBuffer<void*> ptrs_;        // (2, 3, num_experts) their device copy, which cuBLAS reads
  std::vector<int> group_rows_;     // (groups) the rows shared by a group's experts
  std::vector<int> group_size_;     // (groups) its number of experts
};

}  // namespace cbatch
