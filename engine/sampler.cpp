#include "engine/sampler.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "engine/cpu_ops.hpp"
#include "engine/random_weights.hpp"

namespace cbatch {

uint64_t request_rng_seed(const std::optional<uint64_t>& request_seed, uint64_t global_seed,
                          std::string_view id_json) {
  if (request_seed) return splitmix64(*request_seed);
  uint64_t h = 0xCBF29CE484222325ull;  // FNV-1a of the id text
  for (char c : id_json) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001B3ull;
  return splitmix64(global_seed ^ splitmix64(h));
}

double sample_uniform(uint64_t rng_seed, int64_t token_index) {
  const uint64_t bits = splitmix64(rng_seed + 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(token_index + 1));
  return static_cast<double>(bits >> 11) * (1.0 / 9007199254740992.0);  // 53 bits
}

void Sampler::apply_penalties(float* logits, int vocab, const SamplingParams& params,
                              const std::vector<int32_t>& tokens, int num_prompt_tokens) {
  counts_.assign(vocab, 0);
  in_prompt_.assign(vocab, 0);
  for (int i = 0; i < static_cast<int>(tokens.size()); ++i) {
    const int32_t t = tokens[i];
    if (t < 0 || t >= vocab) continue;
    in_prompt_[t] = 1;
    if (i >= num_prompt_tokens) ++counts_[t];
  }
  for (int t = 0; t < vocab; ++t) {
    if (params.repetition_penalty != 1.0f && in_prompt_[t]) {
      logits[t] = logits[t] > 0 ? logits[t] / params.repetition_penalty : logits[t] * params.repetition_penalty;
    }
    if (counts_[t] > 0) {
      logits[t] -= params.frequency_penalty * static_cast<float>(counts_[t]) + params.presence_penalty;
    }
  }
}

int32_t Sampler::sample(float* logits, int vocab, const SamplingParams& params, const std::vector<int32_t>& tokens,
                        int num_prompt_tokens, uint64_t rng_seed) {
  if (params.has_penalties()) apply_penalties(logits, vocab, params, tokens, num_prompt_tokens);
  if (params.is_greedy()) return argmax_row(logits, vocab);

  // Candidates by descending logit (ties: lower id first); top-k cuts the list.
  order_.resize(vocab);
  std::iota(order_.begin(), order_.end(), 0);
  auto by_logit = [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
  const int k = params.top_k > 0 ? std::min(params.top_k, vocab) : vocab;
  std::partial_sort(order_.begin(), order_.begin() + k, order_.end(), by_logit);
  order_.resize(k);

  // Softmax at the temperature, in double.
  const double inv_t = 1.0 / params.temperature;
  const double max_logit = logits[order_[0]];
  probs_.resize(k);
  double sum = 0.0;
  for (int i = 0; i < k; ++i) sum += probs_[i] = std::exp((logits[order_[i]] - max_logit) * inv_t);

  // top-p: the smallest prefix whose mass reaches top_p; min-p: drop tokens under min_p * the top one.
  int keep = k;
  if (params.top_p < 1.0f) {
    double mass = 0.0;
    for (int i = 0; i < k; ++i) {
      mass += probs_[i] / sum;
      if (mass >= params.top_p) {
        keep = i + 1;
        break;
      }
    }
  }
  if (params.min_p > 0.0f) {
    const double floor = params.min_p * probs_[0];
    while (keep > 1 && probs_[keep - 1] < floor) --keep;
  }
  double kept = 0.0;
  for (int i = 0; i < keep; ++i) kept += probs_[i];
  const double target = sample_uniform(rng_seed, static_cast<int64_t>(tokens.size()) - num_prompt_tokens) * kept;
  double cumulative = 0.0;
  for (int i = 0; i < keep; ++i) {
    cumulative += probs_[i];
    if (target < cumulative) return order_[i];
  }
  return order_[keep - 1];
}

}  // namespace cbatch
