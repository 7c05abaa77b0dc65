// The chat formatting of one run: the chat template (the model's, recognized from its text, or the one
// --chat-template names), the tokenizer's bos/eos texts for it, and the end-of-turn token that must
// stop generation. Built once; renders each request's messages to prompt token ids.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/text/chat_template.hpp"
#include "engine/text/tokenizer.hpp"

namespace cbatch {

struct RenderedChat {
  std::string text;            // the prompt as the template renders it
  std::vector<int32_t> ids;    // its tokens (special-token text as ids, no BOS added: the text has it)
  int32_t end_of_turn = -1;    // the token that ends the assistant's turn, -1 if the vocabulary lacks it
  std::string end_of_turn_text;
  std::vector<int32_t> more_stop_ids;  // harmony: <|call|> (a tool call also ends the turn)
};

class ChatFormat {
 public:
  // model_template: the model's Jinja text ("" if none); forced_name: --chat-template ("" if not
  // given; an unknown name throws cbatch::Error naming the flag).
  ChatFormat(const std::string& model_template, const std::string& forced_name, const Tokenizer& tokenizer);

  bool is_available() const { return template_.has_value(); }
  // Why chats cannot be rendered (names --chat-template); "" when they can.
  const std::string& unavailable_reason() const { return unavailable_; }
  // Throws cbatch::Error when unavailable or when the template rejects the messages.
  // options: the request's chat_template_kwargs and reasoning_effort.
  RenderedChat render(const std::vector<ChatMessage>& messages, const ChatOptions& options = {}) const;

 private:
  std::optional<ChatTemplate> template_;
  std::string unavailable_;
  const Tokenizer& tokenizer_;
  std::string bos_text_;
  std::string eos_text_;
  std::string end_of_turn_text_;
  int32_t end_of_turn_id_ = -1;
  std::vector<int32_t> more_stop_ids_;
};

}  // namespace cbatch
