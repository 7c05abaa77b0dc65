// Pooling of an embedding step on the CPU: each pooled sequence's final hidden states (after the final
// RMSNorm where the model has one) reduced to one vector, the mean of its rows (summed in row order, so a
// vector never depends on the rest of the batch), its first row or its last row. The reference the CUDA
// backend would be checked against. A cross-encoder's pooled [CLS] row then goes through its
// sequence-classification head (classify_rows), row by row, so a score never depends on the batch either.
#pragma once
#include <vector>

#include "engine/backend/ragged_batch.hpp"

namespace cbatch {

// x: (num_tokens, dim) final hidden states; final_norm: (dim) or null; out: (num_pooled, dim).
void pool_rows(const RaggedBatch& batch, const float* x, int dim, const float* final_norm, float eps,
               std::vector<float>& out);

}  // namespace cbatch

namespace cbatch {

// A sequence-classification head in fp32: pooler = tanh(W_p x + b_p), logits = W_c pooler + b_c.
struct ClassifierHead {
  const float* pooler = nullptr;           // (dim, dim)
  const float* pooler_bias = nullptr;      // (dim)
  const float* classifier = nullptr;       // (num_labels, dim)
  const float* classifier_bias = nullptr;  // (num_labels)
  int num_labels = 0;
};

// pooled: (num_rows, dim) in, (num_rows, num_labels) out; sums in double.
void classify_rows(const ClassifierHead& head, int dim, int num_rows, std::vector<float>& pooled);

}  // namespace cbatch
