// Chat templates without a Jinja engine: the family is recognized from the template text (ChatML:
// "<|im_start|>", Qwen when it also speaks of Qwen or tool calls; Llama 3: "<|start_header_id|>";
// Llama 2: "[INST]" with "<<SYS>>"; Mistral: "[INST]" without; Gemma: "<start_of_turn>"; Phi-3:
// "<|user|>" with "<|end|>") or named by --chat-template, and rendered by code that reproduces the real
// templates' output exactly, including a default system prompt that a ChatML template writes when the
// chat has none (SmolLM2, Qwen2.5), the dated system block of Llama 3.1+, Gemma's system prompt folded
// into the first user turn and Mistral v3's into the last; Qwen3's enable_thinking switch and templates
// that open <think> in the prompt; gpt-oss's harmony format ("<|start|>" with "<|channel|>"); SmolLM3's
// ChatML with its metadata system turn ("Reasoning Mode"). Rendering adds the generation prompt (where
// the template has one: Mistral's ends with "[/INST]").
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/base/request.hpp"
#include "engine/text/chat_template_spec.hpp"

namespace cbatch {

// The template a Jinja text stands for; nullopt when cbatch does not recognize it.
std::optional<ChatTemplate> recognize_chat_template(std::string_view jinja);
// The template of a --chat-template name; nullopt when unknown. "qwen" is Qwen2.5's (ChatML with its
// default system prompt), "gemma" Gemma 3's, "mistral" Mistral 7B Instruct v0.3's, "phi3" Phi-3's.
std::optional<ChatTemplate> chat_template_by_name(std::string_view name);
// Every name chat_template_by_name knows, in order, and the same joined with ", " for help and errors.
const std::vector<std::string>& chat_template_names();
std::string chat_template_names_text();
// Qwen2.5's default system prompt, which its template writes when the chat has none.
inline constexpr const char* kQwenDefaultSystem = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";

// A human name of the family ("ChatML", "Gemma", ...).
std::string_view chat_family_name(ChatFamily family);

// The text that ends a turn and must stop generation ("<|im_end|>", "<|eot_id|>", "<end_of_turn>",
// "<|end|>", or eos_token).
std::string end_of_turn_text(ChatFamily family, const std::string& eos_token);

// The prompt for `messages` plus the generation prompt. bos_token / eos_token are the tokenizer's
// texts, as the Jinja variables. Throws cbatch::Error when the template rejects the messages (Llama 2,
// Gemma, Mistral: roles must alternate user/assistant after an optional system message).
// options: chat_template_kwargs (enable_thinking: Qwen3, SmolLM3) and reasoning_effort (harmony; low, medium or high,
// default medium: anything else throws cbatch::Error).
std::string render_chat(const ChatTemplate& tmpl, const std::vector<ChatMessage>& messages,
                        const std::string& bos_token, const std::string& eos_token, const ChatOptions& options = {});

}  // namespace cbatch
