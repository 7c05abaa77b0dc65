// The log-probability fields, vLLM's and OpenAI's names: `logprobs` and `prompt_logprobs` (integers k)
// in the simple and completions forms, `echo` (completions only), and chat's `logprobs: true` with
// `top_logprobs: k`. Every k is at most RequestDefaults::max_logprobs (--max-logprobs).
#include "engine/io/sampling_parser.hpp"

namespace cbatch {
namespace {

std::optional<int> read_k(const FieldSet& f, std::string_view key, int max_k) {
  const auto v = f.find(key);
  if (!v) return std::nullopt;
  return static_cast<int>(get_int(*v, f.name(key), 0, max_k,
                                  "an integer from 0 to " + std::to_string(max_k) + " (--max-logprobs)"));
}

void parse_chat_logprobs(const FieldSet& f, int max_k, SamplingParams& out) {
  const auto logprobs = f.find("logprobs");
  const bool on = logprobs && get_bool(*logprobs, f.name("logprobs"));
  const std::optional<int> top = read_k(f, "top_logprobs", max_k);
  if (top && !on) {
    throw FieldError("field '" + f.name("top_logprobs") + "' needs '" + f.name("logprobs") + "': true");
  }
  if (on) out.logprobs = top.value_or(0);
  if (auto v = f.find("echo")) fail_field(f.name("echo"), "left out: chat completions have no echo", *v);
}

}  // namespace

void parse_logprob_fields(const FieldSet& f, RequestForm form, int max_logprobs, SamplingParams& out) {
  if (auto k = read_k(f, "prompt_logprobs", max_logprobs)) out.prompt_logprobs = *k;
  if (form == RequestForm::kOpenAIChat) return parse_chat_logprobs(f, max_logprobs, out);
  if (auto k = read_k(f, "logprobs", max_logprobs)) out.logprobs = *k;
  const auto echo = f.find("echo");
  if (!echo) return;
  if (form != RequestForm::kOpenAICompletions) {
    fail_field(f.name("echo"), "left out: echo is a field of the OpenAI completions form", *echo);
  }
  out.echo = get_bool(*echo, f.name("echo"));
  // As in vLLM: an echoed prompt carries the logprobs the completion asks for.
  if (out.echo && out.logprobs >= 0 && out.prompt_logprobs < 0) out.prompt_logprobs = out.logprobs;
}

}  // namespace cbatch
