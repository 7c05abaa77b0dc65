// The reasoning parsers. Like vLLM's: with </think> in the output, the text before it is the thinking
// (after a <think>, which is dropped with anything before it) and the text after it the answer; without
// </think> the output is all thinking when it opened a <think> or its prompt did (R1-style templates),
// and all answer otherwise. Harmony: the bodies of analysis messages are the thinking, every other
// channel's bodies the answer; an output with no <|channel|> is all answer.
#include "engine/text/reasoning_parser.hpp"

#include <algorithm>
#include <vector>

#include "engine/base/elide.hpp"
#include "engine/base/error.hpp"

namespace cbatch {
namespace {

bool is_harmony_end(std::string_view text) {
  return text == "<|end|>" || text == "<|return|>" || text == "<|call|>" || text == "<|start|>";
}

std::string_view trim(std::string_view s) {
  const size_t begin = s.find_first_not_of(" \t\r\n");
  if (begin == std::string_view::npos) return {};
  return s.substr(begin, s.find_last_not_of(" \t\r\n") + 1 - begin);
}

}  // namespace

bool is_reasoning_parser_name(std::string_view name) {
  return name == "deepseek_r1" || name == "qwen3" || name == "gemma4" || name == "gpt_oss";
}

ReasoningParser::ReasoningParser(std::string_view name, const Tokenizer& tokenizer) : tokenizer_(tokenizer) {
  if (!is_reasoning_parser_name(name)) {
    throw Error("--reasoning-parser " + elide(std::string(name)) + " is not a parser cbatch has (" +
                kReasoningParserNames + ")");
  }
  harmony_ = name == "gpt_oss";
  if (name == "gemma4") {
    start_ = make_marker("<|channel>");
    end_ = make_marker("<channel|>");
    label_ = "thought";
    return;
  }
  if (!harmony_) {
    start_ = make_marker("<think>");
    end_ = make_marker("</think>");
    return;
  }
  channel_ = make_marker("<|channel|>").id;
  message_ = make_marker("<|message|>").id;
  if (channel_ < 0 || message_ < 0) {
    throw Error("--reasoning-parser gpt_oss needs the special tokens <|channel|> and <|message|> (harmony), "
                "which this model's vocabulary lacks");
  }
}

ReasoningParser::Marker ReasoningParser::make_marker(std::string_view text) const {
  Marker m{std::string(text), -1};
  const std::vector<int32_t> ids = tokenizer_.encode(text, /*add_special=*/false);
  if (ids.size() == 1 && tokenizer_.token_text(ids[0]) == text && tokenizer_.decode_piece(-1, ids[0]).empty()) {
    m.id = ids[0];
  }
  return m;
}

namespace {

// (ids + 1) byte offsets of each token's piece in text (clamped: the text may be cut at a stop string).
std::vector<size_t> piece_offsets(const Tokenizer& tokenizer, int32_t prev, std::span<const int32_t> ids,
                                  const std::string& text) {
  std::vector<size_t> offsets(ids.size() + 1, 0);
  size_t at = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    at = std::min(text.size(), at + tokenizer.decode_piece(prev, ids[i]).size());
    offsets[i + 1] = at;
    prev = ids[i];
  }
  return offsets;
}

}  // namespace

ReasoningParser::Found ReasoningParser::find(const Marker& m, std::span<const int32_t> ids, const std::string& text,
                                             int32_t prev, size_t from) const {
  if (m.id < 0) {
    const size_t at = text.find(m.text, from);
    return at == std::string::npos ? Found{} : Found{at, at + m.text.size()};
  }
  const std::vector<size_t> offsets = piece_offsets(tokenizer_, prev, ids, text);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] == m.id && offsets[i] >= from) return {offsets[i], offsets[i + 1]};
  }
  return {};
}

// Only the prompt's last 32 tokens count: a template opens or closes a think block in its generation prompt,
// and an earlier marker is text, such as SmolLM3's system prompt, which explains "<think> ... </think>".
int ReasoningParser::last_marker_in_prompt(std::span<const int32_t> prompt) const {
  if (harmony_ || prompt.empty()) return 0;
  const size_t first = prompt.size() > 32 ? prompt.size() - 32 : 0;
  if (start_.id >= 0 && end_.id >= 0) {
    for (size_t i = prompt.size(); i-- > first;) {
      if (prompt[i] == start_.id) return 1;
      if (prompt[i] == end_.id) return -1;
    }
    return 0;
  }
  // Text markers: the prompt's last tokens decoded.
  const std::string tail =
      tokenizer_.decode({prompt.begin() + static_cast<std::ptrdiff_t>(first), prompt.end()}, first > 0 ? prompt[first - 1] : -1);
  const size_t start = tail.rfind(start_.text), end = tail.rfind(end_.text);
  if (start == std::string::npos && end == std::string::npos) return 0;
  if (end == std::string::npos || (start != std::string::npos && start > end)) return 1;
  return -1;
}

bool ReasoningParser::prompt_opens_thinking(std::span<const int32_t> prompt) const {
  return last_marker_in_prompt(prompt) == 1;
}

bool ReasoningParser::prompt_closes_thinking(std::span<const int32_t> prompt) const {
  return last_marker_in_prompt(prompt) == -1;
}

ReasoningSplit ReasoningParser::split(std::span<const int32_t> prompt, std::span<const int32_t> output,
                                      const std::string& text) const {
  return harmony_ ? split_harmony(prompt, output, text) : split_think(prompt, output, text);
}

ReasoningSplit ReasoningParser::split_think(std::span<const int32_t> prompt, std::span<const int32_t> output,
                                            const std::string& text) const {
  const int32_t prev = prompt.empty() ? -1 : prompt.back();
  const Found start = find(start_, output, text, prev, 0);
  const size_t body = start.begin == std::string::npos ? 0 : start.end;
  const Found end = find(end_, output, text, prev, body);
  ReasoningSplit out;
  if (end.begin != std::string::npos) {
    out.reasoning = text.substr(body, end.begin - body);
    out.content = text.substr(end.end);
  } else if (start.begin != std::string::npos || prompt_opens_thinking(prompt)) {
    out.reasoning = text.substr(body);  // unterminated: max_tokens (or a stop) came inside the thinking
  } else {
    out.content = text;
  }
  if (out.reasoning && !label_.empty() && out.reasoning->starts_with(label_)) {
    const size_t body_at = out.reasoning->find_first_not_of(" \t\r\n", label_.size());
    out.reasoning = body_at == std::string::npos ? std::string() : out.reasoning->substr(body_at);
  }
  return out;
}

ReasoningSplit ReasoningParser::split_harmony(std::span<const int32_t> prompt, std::span<const int32_t> output,
                                              const std::string& text) const {
  const std::vector<size_t> offsets = piece_offsets(tokenizer_, prompt.empty() ? -1 : prompt.back(), output, text);
  const auto ends_body = [&](int32_t id) { return id == channel_ || is_harmony_end(tokenizer_.token_text(id)); };
  const size_t n = output.size();
  ReasoningSplit out;
  bool any_channel = false;
  for (size_t i = 0; i < n;) {
    if (output[i] != channel_) {
      ++i;
      continue;
    }
    any_channel = true;
    size_t j = i + 1;  // the header: the channel's name (and a recipient), up to <|message|>
    while (j < n && output[j] != message_ && !ends_body(output[j])) ++j;
    if (j == n || output[j] != message_) {
      i = j;
      continue;
    }
    const std::string_view channel = trim(std::string_view(text).substr(offsets[i + 1], offsets[j] - offsets[i + 1]));
    size_t k = j + 1;
    while (k < n && !ends_body(output[k])) ++k;
    const std::string body = text.substr(offsets[j + 1], offsets[k] - offsets[j + 1]);
    if (channel.substr(0, 8) == "analysis") {
      out.reasoning = out.reasoning.value_or("") + body;
    } else {
      out.content += body;
    }
    i = k;
  }
  if (!any_channel) out.content = text;
  return out;
}

bool ReasoningParser::ends_thinking(std::span<const int32_t> output, const std::string& text,
                                    size_t old_text_size) const {
  if (output.empty()) return false;
  if (!harmony_) {
    if (end_.id >= 0) return output.back() == end_.id;
    const size_t from = old_text_size >= end_.text.size() ? old_text_size - end_.text.size() + 1 : 0;
    return text.find(end_.text, from) != std::string::npos;
  }
  // Harmony: the <|message|> that opens a final-channel body.
  if (output.back() != message_) return false;
  size_t c = output.size() - 1;
  while (c > 0 && output[c - 1] != channel_) --c;
  if (c == 0) return false;
  std::string header;
  for (size_t i = c; i + 1 < output.size(); ++i) header += tokenizer_.decode_piece(output[i - 1], output[i]);
  return trim(header).substr(0, 5) == "final";
}

}  // namespace cbatch
