// --reasoning-parser: splits a chat output into its thinking (reasoning_content) and its answer (content).
// deepseek_r1 and qwen3 read <think>...</think>; gemma4 reads Gemma 4's thinking channel,
// <|channel>thought ... <channel|> (the label and the whitespace after it dropped); gpt_oss reads harmony's
// channels, the analysis channel being the thinking and the final channel the answer. A marker that is a special token (one id that
// decodes to no text) is found by its id; otherwise by its text. Offsets into the output text come from
// decoding the output ids piece by piece, so the split never changes the ids, logprobs or counts.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "engine/text/tokenizer.hpp"

namespace cbatch {

inline constexpr const char* kReasoningParserNames = "deepseek_r1, qwen3, gemma4, gpt_oss";

// Whether --reasoning-parser NAME is one cbatch has.
bool is_reasoning_parser_name(std::string_view name);

struct ReasoningSplit {
  std::optional<std::string> reasoning;  // nullopt: the output has no thinking
  std::string content;                   // the answer ("" when the output ends inside its thinking)
};

class ReasoningParser {
 public:
  // Throws cbatch::Error naming the value and the known names when `name` is unknown.
  ReasoningParser(std::string_view name, const Tokenizer& tokenizer);

  // prompt, output: the request's token ids; text: the output's text as the engine decoded it (cut at a
  // stop string).
  ReasoningSplit split(std::span<const int32_t> prompt, std::span<const int32_t> output,
                       const std::string& text) const;
  // Whether the prompt itself ends inside a thinking block (an R1-style template opens <think>), or has
  // closed one (Qwen3 with enable_thinking false): then the answer starts with the first output token.
  bool prompt_opens_thinking(std::span<const int32_t> prompt) const;
  bool prompt_closes_thinking(std::span<const int32_t> prompt) const;
  // Whether the token just appended (the last of `output`) ends the thinking: the answer starts after
  // it. old_text_size: the text's size before that token.
  bool ends_thinking(std::span<const int32_t> output, const std::string& text, size_t old_text_size) const;

 private:
  struct Marker {
    std::string text;
    int32_t id = -1;  // >= 0: a special token, found by id (its text is not in the output text)
  };
  struct Found {
    size_t begin = std::string::npos;  // byte offsets in the text; npos when absent
    size_t end = std::string::npos;
  };
  Marker make_marker(std::string_view text) const;
  Found find(const Marker& m, std::span<const int32_t> ids, const std::string& text, int32_t prev,
             size_t from) const;
  int last_marker_in_prompt(std::span<const int32_t> prompt) const;  // 1 start, -1 end, 0 neither
  ReasoningSplit split_think(std::span<const int32_t> prompt, std::span<const int32_t> output,
                             const std::string& text) const;
  ReasoningSplit split_harmony(std::span<const int32_t> prompt, std::span<const int32_t> output,
                               const std::string& text) const;

  const Tokenizer& tokenizer_;
  bool harmony_ = false;
  Marker start_, end_;                    // <think>, </think> (Gemma 4: <|channel>, <channel|>)
  std::string label_;                     // Gemma 4: "thought", the channel's name at the thinking's start
  int32_t channel_ = -1, message_ = -1;   // harmony: <|channel|>, <|message|>
};

}  // namespace cbatch
