#include "engine/sample/sampler.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "engine/base/splitmix64.hpp"

namespace cbatch {

int32_t argmax_row(const float* values, int n) {
  int32_t best = 0;
  for (int i = 1; i < n; ++i) {
    if (values[i] > values[best]) best = i;
  }
  return best;
}

uint64_t request_rng_seed(const std::optional<uint64_t>& request_seed, uint64_t global_seed,
                          std::string_view id_json) {
  if (request_seed) return splitmix64(*request_seed);
  uint64_t h = 0xCBF29CE484222325ull;  // FNV-1a of the id text
  for (char c : id_json) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001B3ull;
  return splitmix64(global_seed ^ splitmix64(h));
}

uint64_t sample_rng_seed(const std::optional<uint64_t>& request_seed, uint64_t global_seed, std::string_view id_json,
                         int index) {
  const uint64_t i = static_cast<uint64_t>(index);
  return request_rng_seed(request_seed ? std::optional<uint64_t>(*request_seed + i) : std::nullopt, global_seed + i,
                          id_json);
}

double sample_uniform(uint64_t rng_seed, int64_t token_index) {
  const uint64_t bits = splitmix64(rng_seed + 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(token_index + 1));
  return static_cast<double>(bits >> 11) * (1.0 / 9007199254740992.0);  // 53 bits
}

RowSampling row_sampling(const SamplingParams& params, uint64_t rng_seed, int64_t token_index) {
  RowSampling row;
  row.temperature = params.temperature;
  row.top_p = params.top_p;
  row.min_p = params.min_p;
  row.top_k = params.top_k;
  row.repetition_penalty = params.repetition_penalty;
  row.frequency_penalty = params.frequency_penalty;
  row.presence_penalty = params.presence_penalty;
  row.uniform = sample_uniform(rng_seed, token_index);
  return row;
}

void append_penalty_tokens(const std::vector<int32_t>& tokens, int num_prompt_tokens, int vocab,
                           std::vector<PenaltyToken>& out, std::vector<int32_t>& slot) {
  slot.resize(static_cast<size_t>(vocab), -1);
  const size_t first = out.size();
  for (int i = 0; i < static_cast<int>(tokens.size()); ++i) {
    const int32_t t = tokens[i];
    if (t < 0 || t >= vocab) continue;
    if (slot[t] < 0) {
      slot[t] = static_cast<int32_t>(out.size());
      out.push_back({t, 0});
    }
    if (i >= num_prompt_tokens) ++out[static_cast<size_t>(slot[t])].output_count;
  }
  for (size_t e = first; e < out.size(); ++e) slot[static_cast<size_t>(out[e].id)] = -1;
}

// The penalties on the tokens that occur in the sequence: the same list and function as a device's.
void Sampler::apply_penalties(float* logits, int vocab, const SamplingParams& params,
                              const std::vector<int32_t>& tokens, int num_prompt_tokens) {
  penalty_tokens_.clear();
  append_penalty_tokens(tokens, num_prompt_tokens, vocab, penalty_tokens_, penalty_slot_);
  for (const PenaltyToken& t : penalty_tokens_) {
    logits[t.id] = penalized_logit(logits[t.id], t.output_count, params.repetition_penalty, params.frequency_penalty,
                                   params.presence_penalty);
  }
}

namespace {

bool better(const Sampler::Candidate& a, const Sampler::Candidate& b) {  // (logit desc, id asc)
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

}  // namespace

void Sampler::gather_candidates(const float* logits, int vocab, int k) {
  candidates_.clear();
  if (k == vocab) {
    for (int id = 0; id < vocab; ++id) candidates_.push_back({logits[id], id, 0.0});
    return;
  }
  // The top k ids (partial_sort: a heap of k that most logits only compare against), back in id order.
  top_ids_.resize(vocab);
  std::iota(top_ids_.begin(), top_ids_.end(), 0);
  std::partial_sort(top_ids_.begin(), top_ids_.begin() + k, top_ids_.end(), [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  std::sort(top_ids_.begin(), top_ids_.begin() + k);
  for (int i = 0; i < k; ++i) candidates_.push_back({logits[top_ids_[i]], top_ids_[i], 0.0});
}

int Sampler::nucleus_size(float top_p, double sum, int& sorted) {
  const int k = static_cast<int>(candidates_.size());
  const auto first = candidates_.begin();
  double mass = 0.0;
  for (int i = 0; i < k; ++i) {
    if (i == sorted) {  // sort the next chunk, twice the last one
      const int upto = std::min(k, std::max(2 * sorted, 64));
      if (upto < k) std::nth_element(first + sorted, first + upto, candidates_.end(), better);
      std::sort(first + sorted, first + upto, better);
      sorted = upto;
    }
    mass += candidates_[i].weight / sum;
    if (mass >= top_p) return i + 1;
  }
  return k;
}

int32_t Sampler::sample(float* logits, int vocab, const SamplingParams& params, const std::vector<int32_t>& tokens,
                        int num_prompt_tokens, uint64_t rng_seed) {
  for (const auto& [id, bias] : params.logit_bias) logits[id] += bias;
  if (params.has_penalties()) apply_penalties(logits, vocab, params, tokens, num_prompt_tokens);
  if (params.is_greedy()) return argmax_row(logits, vocab);

  // Candidates, in id order: every token, or the top k; their weights at the temperature, in double,
  // relative to the top candidate (whose weight is exactly 1).
  const int k = params.top_k > 0 ? std::min(params.top_k, vocab) : vocab;
  gather_candidates(logits, vocab, k);
  float max_logit = candidates_[0].logit;
  for (const Candidate& c : candidates_) max_logit = std::max(max_logit, c.logit);
  const double inv_t = 1.0 / params.temperature;
  double sum = 0.0;
  for (Candidate& c : candidates_) sum += c.weight = std::exp((static_cast<double>(c.logit) - max_logit) * inv_t);

  // top-p: the smallest prefix of the (logit desc, id asc) order whose mass reaches top_p (only that
  // prefix gets sorted: the nucleus, not the vocabulary); min-p: weights under min_p go (the top stays).
  int sorted = 0;
  int keep = params.top_p < 1.0f ? nucleus_size(params.top_p, sum, sorted) : k;
  if (params.min_p > 0.0f) {
    int n = 0;
    for (int i = 0; i < keep; ++i) {
      if (candidates_[i].weight >= params.min_p) candidates_[n++] = candidates_[i];
    }
    keep = n;
  }

  // One draw: the kept candidates in id order, the first whose cumulative weight exceeds u times their
  // total. The filters above keep relative order, so candidates that top-p did not sort are in id order.
  const auto first = candidates_.begin();
  if (sorted > 0) std::sort(first, first + keep, [](const Candidate& a, const Candidate& b) { return a.id < b.id; });
  double kept = 0.0;
  for (int i = 0; i < keep; ++i) kept += candidates_[i].weight;
  const double target = sample_uniform(rng_seed, static_cast<int64_t>(tokens.size()) - num_prompt_tokens) * kept;
  double cumulative = 0.0;
  for (int i = 0; i < keep; ++i) {
    cumulative += candidates_[i].weight;
    if (target < cumulative) return candidates_[i].id;
  }
  return candidates_[keep - 1].id;  // target rounded up to the kept weight
}

}  // namespace cbatch
