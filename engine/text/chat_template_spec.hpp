// What a recognized chat template is (chat_template.hpp recognizes it, chat_renderers.hpp renders it):
// its family and the variations between the templates of one family.
#pragma once
#include <string>

namespace cbatch {

enum class ChatFamily { kChatMl, kQwen, kLlama3, kLlama2, kGemma, kMistral, kPhi3, kHarmony, kSmolLm3, kGemma4 };

struct ChatTemplate {
  ChatFamily family = ChatFamily::kChatMl;
  std::string default_system;  // ChatML, Qwen: system turn added when messages[0] is not one ("" = none)
  bool dated_system = false;   // Llama 3.1+: an always-present system block with knowledge/today dates
  std::string today;           // its "Today Date: ..." value (SmolLM3's too); harmony: its "Current date: "
  bool rejects_system = false;      // Gemma 2, Mistral v1: a system message is an error
  bool mistral_v1 = false;          // Mistral v0.1/v0.2: "[INST] x [/INST]" and answers without a leading space
  bool skips_empty_system = false;  // Phi-3.5: an empty system message renders nothing
  bool thinking_switch = false;  // Qwen3: enable_thinking false closes an empty <think></think> in the prompt
  bool opens_thinking = false;   // R1-style (Qwen3 thinking-only): the generation prompt ends with "<think>\n"
};

}  // namespace cbatch
