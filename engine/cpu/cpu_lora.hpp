// LoRA on the CPU: every adapter's pairs packed once for the batch-invariant matmul (A (rank, in), and
// B (rows, rank) with the pair's scale folded in), and the grouped product that adds them to a step's
// output: the rows are grouped by adapter, and per group and pair two small products run, shrink
// t = x A^T (m, rank) then expand u = t (sB)^T (m, rows), u added to the pair's rows of y. Each row's
// result depends only on its own input and adapter, never on its batch (the matmul is row-independent).
// The (group, pair) products are spread over the pool's threads, each run on one thread. The base weights
// are untouched.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/cpu/cpu_matmul.hpp"
#include "engine/model/lora_adapter.hpp"

namespace cbatch {

class ThreadPool;

struct CpuLoraPair {
  PackedMatrix a;          // (rank, in_features)
  PackedMatrix b;          // (rows, rank), times the pair's scale
  int64_t row_offset = 0;  // first row of the product it adds to
};

// The step's rows of one adapter (id >= 1; the base model's rows form no group).
struct LoraGroup {
  int adapter = 0;            // 1-based adapter id
  std::vector<int32_t> rows;  // ascending batch rows
};

// Groups rows by adapter: row_adapter (num_rows) holds each row's adapter id (0 = none).
std::vector<LoraGroup> group_lora_rows(const std::vector<int32_t>& row_adapter);

class CpuLoraSet {
 public:
  CpuLoraSet() = default;
  CpuLoraSet(const std::vector<LoraAdapter>& adapters, int num_layers, ThreadPool& pool);

  int num_adapters() const { return static_cast<int>(pairs_.size()); }
  // y (m, y_stride) += the pairs of `product` in `layer` for each group, x (m, x_stride) the product's input.
  void add(LoraProduct product, int layer, const std::vector<LoraGroup>& groups, const float* x, int64_t x_stride,
           float* y, int64_t y_stride, ThreadPool& pool);

 private:
  // (adapters, layers * products) each a list of pairs
  std::vector<std::vector<std::vector<CpuLoraPair>>> pairs_;
  std::vector<std::vector<float>> x_rows_;  // (groups) each (group rows, in_features), the gathered input
  std::unique_ptr<ThreadPool> serial_;      // one thread: each task's products run on the thread that took it
};

}  // namespace cbatch
