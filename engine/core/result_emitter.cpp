#include "engine/core/result_emitter.hpp"

#include <algorithm>
#include <chrono>
#include <span>
#include <string_view>
#include <tuple>
#include <utility>

#include "engine/core/embedding_output.hpp"

namespace cbatch {
namespace {

std::string_view finish_reason_name(FinishReason reason) {
  return reason == FinishReason::kStop ? "stop" : "length";
}

}  // namespace

int64_t engine_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void ResultEmitter::fail(const RequestError& error) {
  stats_.add_failure();
  sink_.on_error(error);
}

void ResultEmitter::reject(const Request& request, const std::string& message) {
  RequestError error;
  error.index = request.index;
  error.line = request.line;
  error.id_json = request.id_json;
  error.custom_id = request.custom_id;
  error.form = request.form;
  error.message = "line " + std::to_string(request.line) + ": " + message;
  fail(error);
}

std::pair<std::string, std::optional<std::string>> ResultEmitter::split_output(const Sequence& seq) const {
  if (!splits(seq)) return {seq.text, std::nullopt};
  const std::span<const int32_t> tokens(seq.tokens);
  const size_t num_prompt = static_cast<size_t>(seq.num_prompt_tokens);
  ReasoningSplit split = reasoning_->split(tokens.first(num_prompt), tokens.subspan(num_prompt), seq.text);
  return {std::move(split.content), std::move(split.reasoning)};
}

void ResultEmitter::emit(const Sequence& seq) {
  if (seq.group) return emit_sample(seq);
  if (seq.embedding_group) return emit_embedding(seq);
  RequestResult result;
  result.has_reasoning_split = splits(seq);
  std::tie(result.text, result.reasoning) = split_output(seq);
  result.output_token_ids.assign(seq.tokens.begin() + seq.num_prompt_tokens, seq.tokens.end());
  result.finish_reason = std::string(finish_reason_name(seq.finish_reason));
  result.completion_tokens = seq.num_generated();
  result.logprobs = seq.logprobs;
  finish_result(seq, seq.first_token_ns, result, {seq.num_prompt_tokens, std::max(seq.num_cached_tokens, 0)});
}

// One input of an embedding request is done: kept until the last one, then the request's one line.
void ResultEmitter::emit_embedding(const Sequence& seq) {
  EmbeddingGroup& group = *seq.embedding_group;
  group.vectors[static_cast<size_t>(seq.embedding_index)] = seq.embedding;
  group.prompt_tokens += seq.num_prompt_tokens;
  if (--group.remaining > 0) return;
  RequestResult result;
  if (seq.request->is_score_form()) {  // a cross-encoder's or bi-encoder's pairs: their scores, as samples
    const std::vector<double> scores = pair_scores(group.vectors, *seq.request->embedding);
    for (size_t i = 0; i < scores.size(); ++i) {
      result.samples.emplace_back().index = static_cast<int>(i);
      result.samples.back().score = scores[i];
    }
  } else {
    result.embeddings = std::move(group.vectors);
  }
  result.finish_reason = "stop";
  finish_result(seq, seq.first_token_ns, result, {group.prompt_tokens, 0});
}

// One sample of an n > 1 request finished: kept until the last one, then the request's one line.
void ResultEmitter::emit_sample(const Sequence& seq) {
  SampleGroup& group = *seq.group;
  SampleOutput& out = group.outputs[static_cast<size_t>(seq.sample_index)];
  out.index = seq.sample_index;
  std::tie(out.text, out.reasoning) = split_output(seq);
  out.output_token_ids.assign(seq.tokens.begin() + seq.num_prompt_tokens, seq.tokens.end());
  out.finish_reason = std::string(finish_reason_name(seq.finish_reason));
  out.logprobs = seq.logprobs;
  out.score = seq.score;
  group.completion_tokens += seq.num_generated();
  if (seq.sample_index % seq.request->sampling.n == 0) {  // the first sample of its prompt
    group.prompt_tokens += seq.num_prompt_tokens;
    group.cached_tokens += std::max(seq.num_cached_tokens, 0);
  }
  if (seq.first_token_ns != 0 && (group.first_token_ns == 0 || seq.first_token_ns < group.first_token_ns)) {
    group.first_token_ns = seq.first_token_ns;
  }
  if (--group.remaining > 0) return;
  RequestResult result;
  result.has_reasoning_split = splits(seq);
  result.samples = std::move(group.outputs);
  result.completion_tokens = group.completion_tokens;
  finish_result(seq, group.first_token_ns, result, {group.prompt_tokens, group.cached_tokens});
}

// The fields every result line has (request, prompt, cache, timing), then the line itself.
void ResultEmitter::finish_result(const Sequence& seq, int64_t first_token_ns, RequestResult& result,
                                  std::pair<int, int> prompt_and_cached) {
  const int64_t end_ns = engine_now_ns();
  result.request = seq.request.get();
  if (seq.prompt_logprobs) result.prompt_logprobs = *seq.prompt_logprobs;
  result.prompt_tokens = prompt_and_cached.first;
  result.cached_tokens = prompt_and_cached.second;
  const int64_t first_ns = first_token_ns != 0 ? first_token_ns : end_ns;
  result.ttft_ms = static_cast<double>(first_ns - seq.arrival_ns) * 1e-6;
  result.e2e_ms = static_cast<double>(end_ns - seq.arrival_ns) * 1e-6;
  result.first_step = seq.first_step;
  result.finish_step = seq.finish_step;
  stats_.add_request(result.prompt_tokens, result.completion_tokens, result.ttft_ms, result.e2e_ms);
  sink_.on_result(result);
}

}  // namespace cbatch
