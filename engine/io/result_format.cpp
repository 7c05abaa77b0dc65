// Output line shapes. OpenAI ids are derived from the input line number ("cbatch-<line>"), so a
// rerun writes the same ids; vLLM uses random uuids there.
#include "engine/io/result_format.hpp"

#include <simdjson.h>

#include <cassert>
#include <ctime>

#include "engine/base/elide.hpp"
#include "engine/io/embedding_format.hpp"
#include "engine/io/json_writer.hpp"
#include "engine/io/logprob_format.hpp"
#include "engine/io/score_format.hpp"

namespace cbatch {
namespace {

std::string batch_id(int64_t line) { return "cbatch-" + std::to_string(line); }

int64_t created_time(const ResultFormatOptions& options) {
  return options.created_s >= 0 ? options.created_s : static_cast<int64_t>(std::time(nullptr));
}

// "reasoning_content": the thinking of a chat under --reasoning-parser, null when it had none.
void write_reasoning(JsonWriter& w, const std::optional<std::string>& reasoning) {
  w.key("reasoning_content");
  if (reasoning) {
    w.string(*reasoning);
  } else {
    w.null();
  }
}

std::string format_simple_result(const RequestResult& r, const ResultFormatOptions& options) {
  JsonWriter w;
  w.begin_object();
  w.key("id").raw(r.request->id_json);
  if (r.samples.empty()) {
    w.key("text").string(r.text);
    if (r.has_reasoning_split) write_reasoning(w, r.reasoning);
    w.key("output_token_ids").int_array(r.output_token_ids);
    w.key("finish_reason").string(r.finish_reason);
    if (r.request->sampling.wants_logprobs()) write_simple_logprobs(w.key("logprobs"), r.logprobs, false);
  } else {
    w.key("outputs").begin_array();
    for (const SampleOutput& s : r.samples) {
      w.begin_object();
      w.key("index").int64(s.index);
      w.key("text").string(s.text);
      if (r.has_reasoning_split) write_reasoning(w, s.reasoning);
      w.key("output_token_ids").int_array(s.output_token_ids);
      w.key("finish_reason").string(s.finish_reason);
      w.key("completion_tokens").int64(static_cast<int64_t>(s.output_token_ids.size()));
      if (r.request->sampling.wants_logprobs()) write_simple_logprobs(w.key("logprobs"), s.logprobs, false);
      w.end_object();
    }
    w.end_array();
  }
  if (r.request->sampling.wants_prompt_logprobs()) write_simple_logprobs(w.key("prompt_logprobs"), r.prompt_logprobs, true);
  w.key("prompt_tokens").int64(r.prompt_tokens);
  w.key("completion_tokens").int64(r.completion_tokens);
  w.key("cached_tokens").int64(r.cached_tokens);
  if (!r.request->lora_name.empty()) w.key("lora").string(r.request->lora_name);
  write_simple_metrics(w, r, options);
  w.end_object();
  return w.take() + "\n";
}

// One choice; `logprobs`: its completion's entries. Prompt logprobs not shown by echo come as the
// simple form's "prompt_logprobs" list (vLLM's extra field).
void write_choice(JsonWriter& w, const RequestResult& r, int index, const std::string& text,
                  const std::optional<std::string>& reasoning, const std::string& finish_reason,
                  const std::vector<TokenLogprob>& logprobs) {
  const SamplingParams& p = r.request->sampling;
  w.begin_object();
  w.key("index").int64(index);
  if (r.request->form == RequestForm::kOpenAIChat) {
    w.key("message").begin_object();
    w.key("role").string("assistant");
    w.key("content").string(text);
    if (r.has_reasoning_split) write_reasoning(w, reasoning);
    w.end_object();
  } else {
    w.key("text").string(p.echo ? r.request->echo_text + text : text);
  }
  write_openai_logprobs(w.key("logprobs"), r, logprobs);
  if (p.wants_prompt_logprobs() && !p.echo) write_simple_logprobs(w.key("prompt_logprobs"), r.prompt_logprobs, true);
  w.key("finish_reason").string(finish_reason);
  w.end_object();
}

// The body of an OpenAI completion or chat.completion response.
void write_openai_body(JsonWriter& w, const RequestResult& r, const ResultFormatOptions& options) {
  const bool is_chat = r.request->form == RequestForm::kOpenAIChat;
  w.begin_object();
  w.key("id").string((is_chat ? "chatcmpl-" : "cmpl-") + batch_id(r.request->line));
  w.key("object").string(is_chat ? "chat.completion" : "text_completion");
  w.key("created").int64(created_time(options));
  w.key("model").string(result_model(r, options));
  w.key("choices").begin_array();
  if (r.samples.empty()) write_choice(w, r, 0, r.text, r.reasoning, r.finish_reason, r.logprobs);
  for (const SampleOutput& s : r.samples) write_choice(w, r, s.index, s.text, s.reasoning, s.finish_reason, s.logprobs);
  w.end_array();
  w.key("usage").begin_object();
  w.key("prompt_tokens").int64(r.prompt_tokens);
  w.key("completion_tokens").int64(r.completion_tokens);
  w.key("total_tokens").int64(int64_t{r.prompt_tokens} + r.completion_tokens);
  w.key("prompt_tokens_details").begin_object();
  w.key("cached_tokens").int64(r.cached_tokens);
  w.end_object();
  w.end_object();
  w.end_object();
}

std::string format_openai_result(const RequestResult& r, const ResultFormatOptions& options) {
  const std::string id = batch_id(r.request->line);
  JsonWriter w;
  w.begin_object();
  w.key("id").string(id);
  w.key("custom_id").string(r.request->custom_id);
  w.key("response").begin_object();
  w.key("status_code").int64(200);
  w.key("request_id").string(id);
  w.key("body");
  if (r.request->is_score_form()) {
    write_score_body(w, r, id, created_time(options), result_model(r, options));
  } else if (r.request->embedding) {
    write_embedding_body(w, r, options);
  } else {
    write_openai_body(w, r, options);
  }
  w.end_object();
  w.key("error").null();
  w.end_object();
  return w.take() + "\n";
}

// An error line quotes the id like any other input: elided when long (--resume and merge key error lines by
// their line number, not their id). An integer id is short; a string id is elided as its unescaped text.
std::string error_id_json(const std::string& id_json) {
  if (id_json.size() <= kQuoteBytes) return id_json;
  simdjson::dom::parser parser;
  std::string_view id;
  if (parser.parse(id_json).get_string().get(id) != simdjson::SUCCESS) return json_quote(elide(id_json));
  return json_quote(elide(id));
}

std::string format_simple_error(const RequestError& e) {
  JsonWriter w;
  w.begin_object();
  w.key("id").raw(error_id_json(e.id_json));
  w.key("line").int64(e.line);
  w.key("error").begin_object();
  w.key("type").string(e.type);
  w.key("message").string(elide(e.message, kMessageBytes));
  w.end_object();
  w.end_object();
  return w.take() + "\n";
}

std::string format_openai_error(const RequestError& e) {
  const std::string id = batch_id(e.line);
  JsonWriter w;
  w.begin_object();
  w.key("id").string(id);
  w.key("custom_id").string(elide(e.custom_id));
  w.key("response").begin_object();
  w.key("status_code").int64(400);
  w.key("request_id").string(id);
  w.key("body").null();
  w.end_object();
  w.key("error").begin_object();
  w.key("code").string(e.type);
  w.key("message").string(elide(e.message, kMessageBytes));
  w.end_object();
  w.end_object();
  return w.take() + "\n";
}

}  // namespace

std::string format_result_line(const RequestResult& result, const ResultFormatOptions& options) {
  assert(result.request != nullptr);
  if (result.request->form == RequestForm::kSimple) {
    return result.request->embedding ? format_simple_embedding(result, options) : format_simple_result(result, options);
  }
  return format_openai_result(result, options);
}

std::string format_error_line(const RequestError& error) {
  if (error.form == RequestForm::kSimple) return format_simple_error(error);
  return format_openai_error(error);
}

}  // namespace cbatch
