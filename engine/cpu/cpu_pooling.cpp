#include "engine/cpu/cpu_pooling.hpp"

#include <cstdint>

#include "engine/cpu/cpu_ops.hpp"

namespace cbatch {

void pool_rows(const RaggedBatch& batch, const float* x, int dim, const float* final_norm, float eps,
               std::vector<float>& out) {
  out.assign(static_cast<size_t>(batch.num_pooled()) * dim, 0.0f);
  std::vector<float> normed(static_cast<size_t>(dim));  // (dim)
  for (int i = 0; i < batch.num_pooled(); ++i) {
    const int s = batch.pooled_seqs[i];
    int begin = batch.query_start[s], end = batch.query_start[s + 1];
    if (batch.pooling[i] == Pooling::kCls) end = begin + 1;
    if (batch.pooling[i] == Pooling::kLast) begin = end - 1;
    float* sum = &out[static_cast<size_t>(i) * dim];
    for (int r = begin; r < end; ++r) {
      const float* row = x + static_cast<int64_t>(r) * dim;
      if (final_norm != nullptr) {
        rmsnorm_row(row, final_norm, normed.data(), dim, eps);
        row = normed.data();
      }
      for (int j = 0; j < dim; ++j) sum[j] += row[j];
    }
    for (int j = 0; j < dim; ++j) sum[j] /= static_cast<float>(end - begin);
  }
}

}  // namespace cbatch
