// Batch-invariant fp32 matrix product for the CPU backend: Y (M, N) = X (M, K) * W^T, W (N, K) row-major.
// Every element is one dot product reduced in a fixed order (vector lanes over k, a fixed lane sum, then
// the k tail), whatever M, the tile it lands in, or the thread that computes it. That is what makes
// greedy outputs bit-identical across batch sizes; a general BLAS changes its summation order with M.
#pragma once
#include <cstdint>

namespace cbatch {

class ThreadPool;

void matmul(const float* x, const float* w, float* y, int64_t m, int64_t n, int64_t k, ThreadPool& pool);

// Single-threaded reference: the same reduction order, one element at a time (for tests).
void matmul_ref(const float* x, const float* w, float* y, int64_t m, int64_t n, int64_t k);

}  // namespace cbatch
