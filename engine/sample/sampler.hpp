// Token sampling from one row of logits with vLLM's SamplingParams semantics: logit_bias, penalties, then greedy
// argmax or temperature -> top-k -> top-p -> min-p -> one draw (inverse CDF over the kept tokens in id
// order). The draw is a pure function of the request's seed and the index of the token being generated,
// so a request's output never depends on what else shared its batch. O(vocab) per row plus a sort of the
// top-p nucleus only: the vocabulary is never sorted.
#pragma once
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "engine/sample/radix_sampling.hpp"
#include "engine/base/sampling_params.hpp"

namespace cbatch {

// Index of the largest value; ties go to the lowest index.
int32_t argmax_row(const float* values, int n);

// The request's RNG seed: its own `seed` if given, else derived from (--seed, id).
uint64_t request_rng_seed(const std::optional<uint64_t>& request_seed, uint64_t global_seed,
                          std::string_view id_json);

// Uniform draw in [0, 1) for generated token number `token_index` of a request.
// The RNG seed of completion `index` of a request with n > 1: the seed the same request would get with
// n = 1 and `seed` + index (without a seed field: with --seed global_seed + index). Index 0 is the
// request's own, so sample i never depends on n or on batching.
uint64_t sample_rng_seed(const std::optional<uint64_t>& request_seed, uint64_t global_seed, std::string_view id_json,
                         int index);

double sample_uniform(uint64_t rng_seed, int64_t token_index);

// What a device needs to make the Sampler's draw of generated token `token_index` (penalty_begin/end
// left 0: the caller places the row's PenaltyTokens).
RowSampling row_sampling(const SamplingParams& params, uint64_t rng_seed, int64_t token_index);

// Appends the distinct tokens of a sequence (prompt + output; ids outside the vocabulary skipped) with
// their output counts, in first-occurrence order. slot: scratch of `vocab` entries, all -1 between calls.
void append_penalty_tokens(const std::vector<int32_t>& tokens, int num_prompt_tokens, int vocab,
                           std::vector<PenaltyToken>& out, std::vector<int32_t>& slot);

class Sampler {
 public:
  // logits (vocab) may be modified (penalties, temperature). prompt / output: the sequence so far.
  int32_t sample(float* logits, int vocab, const SamplingParams& params, const std::vector<int32_t>& tokens,
                 int num_prompt_tokens, uint64_t rng_seed);

  // A token still in the draw: its logit, id and weight exp((logit - top logit) / temperature).
  struct Candidate {
    float logit;
    int32_t id;
    double weight;
  };

 private:
  void apply_penalties(float* logits, int vocab, const SamplingParams& params, const std::vector<int32_t>& tokens,
                       int num_prompt_tokens);
  // candidates_ = every token (k == vocab) or the top k, in id order.
  void gather_candidates(const float* logits, int vocab, int k);
  // The size of the top-p prefix; sorts candidates_ by (logit desc, id asc) that far, recording how far
  // in `sorted`.
  int nucleus_size(float top_p, double sum, int& sorted);

  std::vector<PenaltyToken> penalty_tokens_;  // (distinct tokens of the sequence) scratch
  std::vector<int32_t> penalty_slot_;         // (vocab) scratch of append_penalty_tokens, all -1
  std::vector<Candidate> candidates_;  // (up to vocab) scratch
  std::vector<int32_t> top_ids_;       // (vocab) ids, scratch of the top-k selection
};

}  // namespace cbatch
