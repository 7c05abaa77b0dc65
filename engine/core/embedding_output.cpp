#include "engine/core/embedding_output.hpp"

#include <algorithm>
#include <cmath>

namespace cbatch {

std::vector<float> finish_embedding(const float* pooled, int dim, const EmbeddingParams& params) {
  const int n = params.dimensions > 0 && params.dimensions < dim ? params.dimensions : dim;
  std::vector<float> out(pooled, pooled + n);
  if (!params.normalize && n == dim) return out;
  double sum_sq = 0;
  for (float v : out) sum_sq += static_cast<double>(v) * v;
  // sentence-transformers' Normalize divides by max(norm, 1e-12)
  const double scale = 1.0 / std::max(std::sqrt(sum_sq), 1e-12);
  for (float& v : out) v = static_cast<float>(v * scale);
  return out;
}

}  // namespace cbatch
