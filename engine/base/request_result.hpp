// What the engine hands the output writer when a request finishes: the generated text and token ids,
// why it stopped, token counts, and its timing (milliseconds since the run started admitting it, and
// the engine steps of its first and last token).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/base/request.hpp"

namespace cbatch {

// One token of a result's logprobs: its id, log-probability, the bytes it adds to the text, and the top
// alternatives (the same three fields each).
struct TopLogprob {
  int32_t token_id = 0;
  float logprob = 0;
  std::string piece;
};
struct TokenLogprob {
  int32_t token_id = 0;
  float logprob = 0;
  std::string piece;
  std::vector<TopLogprob> top;
};

// One of the n completions of a request with n > 1.
struct SampleOutput {
  int index = 0;
  std::string text;
  std::vector<int32_t> output_token_ids;
  std::string finish_reason;
  std::vector<TokenLogprob> logprobs;     // (output tokens) when the request asks logprobs
  std::optional<std::string> reasoning;   // with a reasoning parser: the thinking (text is then the answer)
  double score = 0;                       // a score request: softmax(yes, no)[yes] of this pair's prompt
};

struct RequestResult {
  const Request* request = nullptr;       // id, line, form and custom_id of the finished request
  std::string text;                       // raw bytes; may end inside a UTF-8 character
  std::vector<int32_t> output_token_ids;  // (completion_tokens) includes EOS when it stopped on it
  std::string finish_reason;              // "stop" or "length"
  // A chat under --reasoning-parser: `text` (and each sample's) is the answer only, `reasoning` the
  // thinking (nullopt: none); output_token_ids and logprobs stay whole.
  bool has_reasoning_split = false;
  std::optional<std::string> reasoning;
  int prompt_tokens = 0;
  int completion_tokens = 0;
  int cached_tokens = 0;                  // prompt tokens the prefix cache served (not computed)
  double ttft_ms = 0;                     // arrival to first generated token
  double e2e_ms = 0;                      // arrival to finish
  int64_t first_step = 0;                 // engine step that produced the first token
  int64_t finish_step = 0;                // engine step that finished it
  // n > 1: every completion, by index (text, output_token_ids and finish_reason above are unused;
  // completion_tokens is their sum).
  std::vector<SampleOutput> samples;
  std::vector<TokenLogprob> logprobs;         // (output tokens) when the request asks logprobs (n = 1)
  std::vector<TokenLogprob> prompt_logprobs;  // (prompt tokens - 1) from the second prompt token on
  std::vector<std::vector<float>> embeddings;  // (inputs) an embedding request's vectors, in input order
};

}  // namespace cbatch
