// The logprob fields of output lines. Simple form: "logprobs" and "prompt_logprobs" as lists of
// {"token_id", "token", "logprob", "top": [{"token_id", "token", "logprob"}, ...]} (prompt_logprobs starts
// with null: the first prompt token has no log-probability). OpenAI completions: {"tokens",
// "token_logprobs", "top_logprobs", "text_offset"}, with the prompt's tokens first under echo; chat:
// {"content": [{"token", "logprob", "bytes", "top_logprobs": [{"token", "logprob", "bytes"}]}]}.
// A token is its text piece when that is valid UTF-8 alone, else "bytes:\xNN..." (its bytes in hex).
#pragma once
#include <string>
#include <vector>

#include "engine/base/request_result.hpp"
#include "engine/io/json_writer.hpp"

namespace cbatch {

std::string token_display(const std::string& piece);

// Writes the value of a simple-form "logprobs" (null_first false) or "prompt_logprobs" (true) key.
void write_simple_logprobs(JsonWriter& w, const std::vector<TokenLogprob>& entries, bool null_first);
// Writes the value of an OpenAI choice's "logprobs" key: the completion's entries (and, for completions
// with echo, the prompt's before them), or null when the request asks none.
void write_openai_logprobs(JsonWriter& w, const RequestResult& r, const std::vector<TokenLogprob>& completion);

}  // namespace cbatch
