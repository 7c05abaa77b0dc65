// Chat templates without a Jinja engine: the family is recognized from the template text (ChatML:
// "<|im_start|>"; Llama 3: "<|start_header_id|>"; Llama 2: "[INST]" with "<<SYS>>") or named by
// --chat-template, and rendered by code that reproduces the real templates' output exactly,
// including a default system prompt that a ChatML template writes when the chat has none (SmolLM2,
// Qwen2.5) and the dated system block of Llama 3.1+. Rendering adds the generation prompt.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/core/request.hpp"

namespace cbatch {

enum class ChatFamily { kChatMl, kLlama3, kLlama2 };

struct ChatTemplate {
  ChatFamily family = ChatFamily::kChatMl;
  std::string default_system;  // ChatML: system turn added when messages[0] is not one ("" = none)
  bool dated_system = false;   // Llama 3.1+: an always-present system block with knowledge/today dates
  std::string today;           // its "Today Date: ..." value
};

// The template a Jinja text stands for; nullopt when cbatch does not recognize it.
std::optional<ChatTemplate> recognize_chat_template(std::string_view jinja);
// The plain template of a --chat-template name (chatml, llama3, llama2); nullopt when unknown.
std::optional<ChatTemplate> chat_template_by_name(std::string_view name);
inline constexpr const char* kChatTemplateNames = "chatml, llama3, llama2";

// The text that ends a turn and must stop generation ("<|im_end|>", "<|eot_id|>", or eos_token).
std::string end_of_turn_text(ChatFamily family, const std::string& eos_token);

// The prompt for `messages` plus the generation prompt. bos_token / eos_token are the tokenizer's
// texts, as the Jinja variables. Throws cbatch::Error when the template rejects the messages (Llama 2:
// roles must alternate user/assistant after an optional system message).
std::string render_chat(const ChatTemplate& tmpl, const std::vector<ChatMessage>& messages,
                        const std::string& bos_token, const std::string& eos_token);

}  // namespace cbatch
