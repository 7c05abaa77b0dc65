// The renderers behind render_chat, one per template family; each follows its reference Jinja template
// (tests/e2e/chat_templates/) line by line. Jinja's `trim` and Python's strip() remove Unicode
// whitespace at both ends.
#pragma once
#include <string>
#include <vector>

#include "engine/base/request.hpp"
#include "engine/text/chat_template_spec.hpp"

namespace cbatch {

std::string render_chatml(const ChatTemplate& t, const std::vector<ChatMessage>& messages, const ChatOptions& options);
std::string render_harmony(const ChatTemplate& t, const std::vector<ChatMessage>& messages, const ChatOptions& options);
std::string render_llama3(const ChatTemplate& t, const std::vector<ChatMessage>& messages, const std::string& bos);
std::string render_llama2(const std::vector<ChatMessage>& messages, const std::string& bos, const std::string& eos);
std::string render_gemma(const ChatTemplate& t, const std::vector<ChatMessage>& messages, const std::string& bos);
std::string render_mistral(const ChatTemplate& t, const std::vector<ChatMessage>& messages, const std::string& bos,
                           const std::string& eos);
std::string render_phi3(const ChatTemplate& t, const std::vector<ChatMessage>& messages);
std::string render_smollm3(const ChatTemplate& t, const std::vector<ChatMessage>& messages, const ChatOptions& options);
std::string render_gemma4(const std::vector<ChatMessage>& messages, const std::string& bos, const ChatOptions& options);

}  // namespace cbatch
