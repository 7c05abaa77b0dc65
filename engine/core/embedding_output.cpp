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

namespace {

double cosine(const std::vector<float>& a, const std::vector<float>& b) {
  double dot = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    dot += static_cast<double>(a[i]) * b[i];
    aa += static_cast<double>(a[i]) * a[i];
    bb += static_cast<double>(b[i]) * b[i];
  }
  // torch's cosine_similarity eps on the norms' product; rounding may not leave [-1, 1]
  return std::clamp(dot / std::max(std::sqrt(aa) * std::sqrt(bb), 1e-12), -1.0, 1.0);
}

}  // namespace

std::vector<double> pair_scores(const std::vector<std::vector<float>>& vectors, const EmbeddingParams& params) {
  std::vector<double> scores;
  if (params.pair_scoring == PairScoring::kClassifier) {
    for (const std::vector<float>& logits : vectors) {
      const double logit = logits.at(0);
      scores.push_back(params.score_sigmoid ? 1.0 / (1.0 + std::exp(-logit)) : logit);
    }
  } else if (params.pair_scoring == PairScoring::kCosine) {
    const size_t queries = static_cast<size_t>(params.num_queries);
    for (size_t i = queries; i < vectors.size(); ++i) {
      const size_t pair = i - queries;
      scores.push_back(cosine(vectors[queries == 1 ? 0 : pair], vectors[i]));
    }
  }
  return scores;
}

}  // namespace cbatch
