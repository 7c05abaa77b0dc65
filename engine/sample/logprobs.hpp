// Log-probabilities of tokens (vLLM's `logprobs` / `prompt_logprobs`): the log-softmax of the model's raw
// logits row, before constraint masks, penalties and temperature, in fp32. A row is reduced at once to
// the k values a request asks for (its target token's log-probability and the k most likely tokens, ties
// to the lower id), so no (rows, vocab) array of log-probabilities is ever kept.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace cbatch {

// One row of a step's batch whose log-softmax the backend reduces (StepRequest::logprob_queries).
struct LogprobQuery {
  int32_t row = 0;      // batch row (any row, not only a sampling row)
  int32_t k = 0;        // top tokens wanted, 0..StepRequest::logprob_width
  int32_t target = -1;  // token whose log-probability is wanted; -1: the row's token in StepResult::token_ids
};

// The answers, query by query: top ids/logprobs are (queries, width), rows with k < width padded with id -1.
struct LogprobAnswers {
  int width = 0;
  std::vector<float> target_logprob;  // (queries)
  std::vector<int32_t> top_ids;       // (queries, width) most likely first, ties to the lower id
  std::vector<float> top_logprobs;    // (queries, width)
  void resize(size_t queries, int new_width);
};

// Reduces one logits row: log-softmax in double (max, then the sum of exp), values rounded to fp32.
// k may exceed vocab (then the whole vocabulary, sorted); -inf logits get -inf; top_* have room for k.
// Returns the target's log-probability (target in [0, vocab)).
float reduce_logprob_row(const float* logits, int vocab, int k, int32_t target, int32_t* top_ids, float* top_logprobs);

// The k largest of `values` (n of them) by value, ties to the lower index, written in order; k <= n.
void top_k_indices(const float* values, int n, int k, int32_t* ids);

}  // namespace cbatch
