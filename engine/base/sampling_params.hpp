// Per-request sampling parameters, with vLLM SamplingParams names and defaults.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/base/constraint_spec.hpp"

namespace cbatch {

inline constexpr int kMaxSamplesPerRequest = 1024;

struct SamplingParams {
  int n = 1;                       // completions of the prompt, prefilled once (1..kMaxSamplesPerRequest)
  int max_tokens = 16;
  float temperature = 1.0f;        // < 1e-5 means greedy
  float top_p = 1.0f;              // in (0, 1]
  int top_k = -1;                  // -1 (or 0) = off
  float min_p = 0.0f;              // in [0, 1]
  std::optional<uint64_t> seed;    // per-request seed; default derives from --seed and the id
  std::vector<std::string> stop;   // stop strings (not included in the text)
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  float repetition_penalty = 1.0f;   // > 0
  float presence_penalty = 0.0f;     // in [-2, 2]
  float frequency_penalty = 0.0f;    // in [-2, 2]
  // OpenAI's logit_bias: added to the token's logit before penalties and sampling (greedy included).
  // (entries) token id (inside the vocabulary) and bias in [-100, 100], ids ascending and distinct.
  std::vector<std::pair<int32_t, float>> logit_bias;
  // Structured output: the completion must be a string of this constraint's language (a regex, choice
  // lists and most JSON schemas as one; grammars, json_object and recursive schemas as rules). kNone:
  // unconstrained.
  ConstraintSpec constraint;
  // Log-probabilities (logprobs.hpp): the sampled token's plus the k most likely at each generated position
  // (`logprobs`), and the same for every prompt position but the first (`prompt_logprobs`); -1: none.
  int logprobs = -1;
  int prompt_logprobs = -1;
  bool echo = false;               // OpenAI completions: the prompt (and its logprobs) before the completion

  bool is_greedy() const { return temperature < 1e-5f; }
  bool is_constrained() const { return constraint.is_set(); }
  bool has_logit_bias() const { return !logit_bias.empty(); }
  bool wants_logprobs() const { return logprobs >= 0; }
  bool wants_prompt_logprobs() const { return prompt_logprobs >= 0; }
  bool has_penalties() const {
    return repetition_penalty != 1.0f || presence_penalty != 0.0f || frequency_penalty != 0.0f;
  }
};

}  // namespace cbatch
