// An embedding request's final vector from the backend's pooled hidden state: the first `dimensions`
// values (Matryoshka truncation; 0 keeps all), then scaled to unit L2 length when the request normalises
// (a truncated vector is always renormalised: its prefix alone is not unit length). Sums in double.
#pragma once
#include <vector>

#include "engine/base/embedding_params.hpp"

namespace cbatch {

std::vector<float> finish_embedding(const float* pooled, int dim, const EmbeddingParams& params);

// vectors: (inputs) the request's finished vectors in input order; returns (pairs) the scores.
std::vector<double> pair_scores(const std::vector<std::vector<float>>& vectors, const EmbeddingParams& params);

}  // namespace cbatch
