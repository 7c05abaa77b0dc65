// Pooling of an embedding step on the CPU: each pooled sequence's final hidden states (after the final
// RMSNorm where the model has one) reduced to one vector, the mean of its rows (summed in row order, so a
// vector never depends on the rest of the batch), its first row or its last row. The reference the CUDA
// backend would be checked against.
#pragma once
#include <vector>

#include "engine/backend/ragged_batch.hpp"

namespace cbatch {

// x: (num_tokens, dim) final hidden states; final_norm: (dim) or null; out: (num_pooled, dim).
void pool_rows(const RaggedBatch& batch, const float* x, int dim, const float* final_norm, float eps,
               std::vector<float>& out);

}  // namespace cbatch
