#include "engine/cpu/cpu_pooling.hpp"

#include <cmath>
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

void classify_rows(const ClassifierHead& head, int dim, int num_rows, std::vector<float>& pooled) {
  std::vector<float> out(static_cast<size_t>(num_rows) * head.num_labels);  // (num_rows, num_labels)
  std::vector<double> hidden(static_cast<size_t>(dim));                       // (dim) the pooler's output
  for (int i = 0; i < num_rows; ++i) {
    const float* x = &pooled[static_cast<size_t>(i) * dim];
    for (int o = 0; o < dim; ++o) {
      const float* w = head.pooler + static_cast<int64_t>(o) * dim;
      double sum = head.pooler_bias[o];
      for (int j = 0; j < dim; ++j) sum += static_cast<double>(w[j]) * x[j];
      hidden[o] = std::tanh(sum);
    }
    for (int label = 0; label < head.num_labels; ++label) {
      const float* w = head.classifier + static_cast<int64_t>(label) * dim;
      double sum = head.classifier_bias[label];
      for (int j = 0; j < dim; ++j) sum += w[j] * hidden[j];
      out[static_cast<size_t>(i) * head.num_labels + label] = static_cast<float>(sum);
    }
  }
  pooled = std::move(out);
}

}  // namespace cbatch
