// Batch-invariant fp32 matrix product for the CPU backend: Y (M, N) = X (M, K) * W^T for a Linear weight
// W (N, K). W is packed once, at load, into panels of kPanelWidth output columns laid out k-major, and the
// product is an outer-product (BLIS-style) kernel: every output element is one fused multiply-add chain
// over k in order, from zero, whatever M, the tile it lands in, or the thread that computes it. That is
// what makes greedy outputs bit-identical across batch sizes (a general BLAS changes its summation order
// with M), and it is exactly matmul_ref's order.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>

namespace cbatch {

class ThreadPool;

// Output columns per panel (the SIMD width this binary was built for: 16, or 8 without AVX-512).
int matmul_panel_width();

class PackedMatrix {
 public:
  // fill(row_begin, num_rows, out) writes rows [row_begin, row_begin + num_rows) of W (N, K) as fp32 to
  // out (num_rows, K). Rows are packed in parallel, one panel per task.
  using RowFiller = std::function<void(int64_t, int64_t, float*)>;
  PackedMatrix() = default;
  PackedMatrix(int64_t n, int64_t k, const RowFiller& fill, ThreadPool& pool);

  int64_t rows() const { return n_; }   // N, output features
  int64_t cols() const { return k_; }   // K, input features
  const float* data() const { return data_.get(); }

 private:
  struct FreeDeleter {
    void operator()(float* p) const;
  };
  std::unique_ptr<float[], FreeDeleter> data_;  // (ceil(N / width), K, width), zero-padded past N
  int64_t n_ = 0;
  int64_t k_ = 0;
};

void matmul(const float* x, const PackedMatrix& w, float* y, int64_t m, ThreadPool& pool);

// The same function one element at a time: y[i][j] = fma chain over k of x[i][k] * w[j][k] (for tests).
void matmul_ref(const float* x, const float* w, float* y, int64_t m, int64_t n, int64_t k);

}  // namespace cbatch
