#include "engine/io/logprob_format.hpp"

#include <cstdio>

#include "engine/text/utf8.hpp"

namespace cbatch {
namespace {

void write_simple_entry(JsonWriter& w, int32_t id, const std::string& piece, float logprob) {
  w.key("token_id").int64(id);
  w.key("token").string(token_display(piece));
  w.key("logprob").number(logprob);
}

// Characters of the displayed token (OpenAI's text_offset counts characters).
int64_t display_length(const std::string& piece) {
  const std::string text = token_display(piece);
  int64_t n = 0;
  for (unsigned char c : text) n += (c & 0xC0) != 0x80;
  return n;
}

void write_chat_token(JsonWriter& w, const std::string& piece, float logprob) {
  w.key("token").string(token_display(piece));
  w.key("logprob").number(logprob);
  w.key("bytes").begin_array();
  for (unsigned char c : piece) w.int64(c);
  w.end_array();
}

void write_chat_logprobs(JsonWriter& w, const std::vector<TokenLogprob>& entries) {
  w.begin_object();
  w.key("content").begin_array();
  for (const TokenLogprob& e : entries) {
    w.begin_object();
    write_chat_token(w, e.piece, e.logprob);
    w.key("top_logprobs").begin_array();
    for (const TopLogprob& t : e.top) {
      w.begin_object();
      write_chat_token(w, t.piece, t.logprob);
      w.end_object();
    }
    w.end_array();
    w.end_object();
  }
  w.end_array();
  w.end_object();
}

// OpenAI completions: parallel lists; `first` (echo's first prompt token) has no logprob (null).
void write_completion_logprobs(JsonWriter& w, const std::string* first, const std::vector<const TokenLogprob*>& entries) {
  w.begin_object();
  w.key("tokens").begin_array();
  if (first) w.string(token_display(*first));
  for (const TokenLogprob* e : entries) w.string(token_display(e->piece));
  w.end_array();
  w.key("token_logprobs").begin_array();
  if (first) w.null();
  for (const TokenLogprob* e : entries) w.number(e->logprob);
  w.end_array();
  w.key("top_logprobs").begin_array();
  if (first) w.null();
  for (const TokenLogprob* e : entries) {
    w.begin_object();
    for (const TopLogprob& t : e->top) w.key(token_display(t.piece)).number(t.logprob);
    w.end_object();
  }
  w.end_array();
  w.key("text_offset").begin_array();
  int64_t offset = 0;
  if (first) w.int64(offset), offset += display_length(*first);
  for (const TokenLogprob* e : entries) w.int64(offset), offset += display_length(e->piece);
  w.end_array();
  w.end_object();
}

}  // namespace

std::string token_display(const std::string& piece) {
  if (is_valid_utf8(piece)) return piece;
  std::string out = "bytes:";
  char hex[5];
  for (unsigned char c : piece) {
    std::snprintf(hex, sizeof hex, "\\x%02x", c);
    out += hex;
  }
  return out;
}

void write_simple_logprobs(JsonWriter& w, const std::vector<TokenLogprob>& entries, bool null_first) {
  w.begin_array();
  if (null_first) w.null();
  for (const TokenLogprob& e : entries) {
    w.begin_object();
    write_simple_entry(w, e.token_id, e.piece, e.logprob);
    w.key("top").begin_array();
    for (const TopLogprob& t : e.top) {
      w.begin_object();
      write_simple_entry(w, t.token_id, t.piece, t.logprob);
      w.end_object();
    }
    w.end_array();
    w.end_object();
  }
  w.end_array();
}

void write_openai_logprobs(JsonWriter& w, const RequestResult& r, const std::vector<TokenLogprob>& completion) {
  const SamplingParams& p = r.request->sampling;
  if (!p.wants_logprobs()) {
    w.null();
    return;
  }
  if (r.request->form == RequestForm::kOpenAIChat) return write_chat_logprobs(w, completion);
  std::vector<const TokenLogprob*> entries;
  if (p.echo) {
    for (const TokenLogprob& e : r.prompt_logprobs) entries.push_back(&e);
  }
  for (const TokenLogprob& e : completion) entries.push_back(&e);
  write_completion_logprobs(w, p.echo ? &r.request->first_prompt_piece : nullptr, entries);
}

}  // namespace cbatch
