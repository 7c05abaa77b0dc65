#include "engine/sample/logprobs.hpp"

#include <algorithm>
#include <cmath>

namespace cbatch {

void LogprobAnswers::resize(size_t queries, int new_width) {
  width = new_width;
  target_logprob.assign(queries, 0.0f);
  top_ids.assign(queries * static_cast<size_t>(width), -1);
  top_logprobs.assign(queries * static_cast<size_t>(width), -INFINITY);
}

namespace {

// a ranks before b: larger value, or equal value and lower index (NaN ranks last).
bool ranks_before(float va, int32_t a, float vb, int32_t b) {
  if (std::isnan(vb)) return !std::isnan(va) || a < b;
  if (std::isnan(va)) return false;
  return va > vb || (va == vb && a < b);
}

}  // namespace

void top_k_indices(const float* values, int n, int k, int32_t* ids) {
  if (k <= 0) return;
  // A sorted list of the best k so far; a candidate is compared with the worst kept one first.
  int size = 0;
  for (int32_t i = 0; i < n; ++i) {
    const float v = values[i];
    if (size == k && !ranks_before(v, i, values[ids[k - 1]], ids[k - 1])) continue;
    int pos = size == k ? k - 1 : size++;
    while (pos > 0 && ranks_before(v, i, values[ids[pos - 1]], ids[pos - 1])) {
      ids[pos] = ids[pos - 1];
      --pos;
    }
    ids[pos] = i;
  }
}

float reduce_logprob_row(const float* logits, int vocab, int k, int32_t target, int32_t* top_ids, float* top_logprobs) {
  float max = -INFINITY;
  for (int i = 0; i < vocab; ++i) max = std::max(max, logits[i]);
  double sum = 0;
  if (std::isfinite(max)) {
    for (int i = 0; i < vocab; ++i) sum += std::exp(static_cast<double>(logits[i]) - max);
  }
  const double lse = static_cast<double>(max) + std::log(sum);  // -inf or NaN for a row without a finite logit
  const auto logprob = [&](int32_t id) { return static_cast<float>(static_cast<double>(logits[id]) - lse); };
  const int kk = std::min(k, vocab);
  top_k_indices(logits, vocab, kk, top_ids);
  for (int i = 0; i < kk; ++i) top_logprobs[i] = logprob(top_ids[i]);
  return logprob(target);
}

}  // namespace cbatch
