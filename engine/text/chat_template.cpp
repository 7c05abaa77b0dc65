// Recognition of chat templates from their Jinja text, the --chat-template names, and the dispatch
// to the family renderers (chat_renderers.cpp). Recognition looks for each family's marker tokens
// and for the details that change the output (default system prompts, dates, variants).
#include "engine/text/chat_template.hpp"

#include <ctime>
#include <utility>

#include "engine/text/chat_renderers.hpp"

namespace cbatch {
namespace {

bool contains(std::string_view text, std::string_view part) { return text.find(part) != std::string_view::npos; }

// A Jinja string literal's escapes that templates use in system prompts: \n, \t, \', \", \\.
std::string unescape_literal(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\\' || i + 1 == text.size()) {
      out += text[i];
      continue;
    }
    const char c = text[++i];
    out += c == 'n' ? '\n' : c == 't' ? '\t' : c;
  }
  return out;
}

// The literal system turn a ChatML template writes when the chat has no system message: the text of
// '<|im_start|>system\n...<|im_end|>' where "..." is plain text (no quotes, no expressions).
std::string default_chatml_system(std::string_view jinja) {
  constexpr std::string_view kStart = "<|im_start|>system";
  for (size_t at = jinja.find(kStart); at != std::string_view::npos; at = jinja.find(kStart, at + 1)) {
    std::string_view rest = jinja.substr(at + kStart.size());
    if (rest.substr(0, 1) == "\n") {
      rest.remove_prefix(1);
    } else if (rest.substr(0, 2) == "\\n") {
      rest.remove_prefix(2);
    } else {
      continue;
    }
    const size_t end = rest.find("<|im_end|>");
    const std::string_view body = rest.substr(0, end);
    if (end == std::string_view::npos || body.find_first_of("'\"{}+") != std::string_view::npos) continue;
    return unescape_literal(body);
  }
  return "";
}

// Llama 3.2 sets date_string = strftime_now("%d %b %Y") (today) where the caller has strftime_now, as
// transformers does; Llama 3.1 sets the literal "26 Jul 2024".
std::string llama3_today(std::string_view jinja) {
  if (contains(jinja, "strftime_now")) {
    const std::time_t now = std::time(nullptr);
    std::tm local{};
    localtime_r(&now, &local);
    char buffer[32];
    std::strftime(buffer, sizeof(buffer), "%d %b %Y", &local);
    return buffer;
  }
  constexpr std::string_view kSet = "date_string = \"";
  if (const size_t at = jinja.find(kSet); at != std::string_view::npos) {
    const size_t begin = at + kSet.size();
    const size_t end = jinja.find('"', begin);
    if (end != std::string_view::npos) return std::string(jinja.substr(begin, end - begin));
  }
  return "26 Jul 2024";
}

// ChatML with Qwen's marks: Qwen2.5's default system prompt, or the tool-call blocks of Qwen2.5/Qwen3.
bool is_qwen(std::string_view jinja) { return contains(jinja, "You are Qwen") || contains(jinja, "<tool_call>"); }

}  // namespace

namespace {

// Today's date in strftime's `format`, local time, as the templates' strftime_now gives it.
std::string today_as(const char* format) {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char buffer[32];
  std::strftime(buffer, sizeof(buffer), format, &local);
  return buffer;
}

std::string today_iso() { return today_as("%Y-%m-%d"); }

}  // namespace

std::optional<ChatTemplate> recognize_chat_template(std::string_view jinja) {
  ChatTemplate t;
  if (contains(jinja, "<|start|>") && contains(jinja, "<|channel|>")) {
    t.family = ChatFamily::kHarmony;
    t.today = today_iso();
  } else if (contains(jinja, "<|im_start|>") && contains(jinja, "Reasoning Mode: ")) {
    t.family = ChatFamily::kSmolLm3;  // before ChatML: its own system turn and thinking switch
    t.today = today_as("%d %B %Y");
  } else if (contains(jinja, "<|im_start|>")) {
    t.family = is_qwen(jinja) ? ChatFamily::kQwen : ChatFamily::kChatMl;
    t.default_system = default_chatml_system(jinja);
    t.thinking_switch = contains(jinja, "enable_thinking");
    // The generation prompt written with an opened think block, as one literal (escaped or not).
    t.opens_thinking = contains(jinja, "<|im_start|>assistant\\n<think>\\n") ||
                       contains(jinja, "<|im_start|>assistant\n<think>\n");
  } else if (contains(jinja, "<|start_header_id|>")) {
    t.family = ChatFamily::kLlama3;
    t.dated_system = contains(jinja, "Cutting Knowledge Date");
    if (t.dated_system) t.today = llama3_today(jinja);
  } else if (contains(jinja, "<|turn>") && contains(jinja, "<turn|>")) {
    t.family = ChatFamily::kGemma4;  // before Gemma's: its own turn markers and thinking channel
  } else if (contains(jinja, "<start_of_turn>")) {
    t.family = ChatFamily::kGemma;
    t.rejects_system = contains(jinja, "System role not supported");  // Gemma 2
  } else if (contains(jinja, "[INST]") && contains(jinja, "<<SYS>>")) {
    t.family = ChatFamily::kLlama2;
  } else if (contains(jinja, "[INST]") && contains(jinja, "[/INST]")) {
    t.family = ChatFamily::kMistral;
    t.mistral_v1 = contains(jinja, " [/INST]");  // v0.1/v0.2: ' [/INST]'; v3: "[/INST]" right after the text
  } else if (contains(jinja, "<|user|>") && contains(jinja, "<|end|>")) {
    t.family = ChatFamily::kPhi3;
    t.skips_empty_system = contains(jinja, "'system' and message['content']");  // Phi-3.5
  } else {
    return std::nullopt;
  }
  return t;
}

namespace {
// The --chat-template names; one table for chat_template_by_name, the option's check and its help.
constexpr std::pair<std::string_view, ChatFamily> kTemplateNames[] = {
    {"chatml", ChatFamily::kChatMl}, {"llama3", ChatFamily::kLlama3},   {"llama2", ChatFamily::kLlama2},
    {"gemma", ChatFamily::kGemma},   {"qwen", ChatFamily::kQwen},       {"qwen3", ChatFamily::kQwen},
    {"mistral", ChatFamily::kMistral}, {"phi3", ChatFamily::kPhi3},     {"harmony", ChatFamily::kHarmony},
    {"smollm3", ChatFamily::kSmolLm3}, {"gemma4", ChatFamily::kGemma4}};
}  // namespace

const std::vector<std::string>& chat_template_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const auto& entry : kTemplateNames) v.emplace_back(entry.first);
    return v;
  }();
  return names;
}

std::string chat_template_names_text() {
  std::string text;
  for (const auto& name : chat_template_names()) text += (text.empty() ? "" : ", ") + name;
  return text;
}

std::optional<ChatTemplate> chat_template_by_name(std::string_view name) {
  for (const auto& [known, family] : kTemplateNames) {
    if (name != known) continue;
    ChatTemplate t;
    t.family = family;
    if (name == "qwen") t.default_system = kQwenDefaultSystem;
    t.thinking_switch = name == "qwen3";
    if (family == ChatFamily::kHarmony) t.today = today_iso();
    if (family == ChatFamily::kSmolLm3) t.today = today_as("%d %B %Y");
    return t;
  }
  return std::nullopt;
}

std::string_view chat_family_name(ChatFamily family) {
  switch (family) {
    case ChatFamily::kChatMl: return "ChatML";
    case ChatFamily::kQwen: return "Qwen (ChatML)";
    case ChatFamily::kLlama3: return "Llama 3";
    case ChatFamily::kLlama2: return "Llama 2";
    case ChatFamily::kGemma: return "Gemma";
    case ChatFamily::kMistral: return "Mistral";
    case ChatFamily::kPhi3: return "Phi-3";
    case ChatFamily::kHarmony: return "harmony (gpt-oss)";
    case ChatFamily::kSmolLm3: return "SmolLM3 (ChatML)";
    case ChatFamily::kGemma4: return "Gemma 4";
  }
  return "";
}

std::string end_of_turn_text(ChatFamily family, const std::string& eos_token) {
  switch (family) {
    case ChatFamily::kChatMl:
    case ChatFamily::kQwen:
    case ChatFamily::kSmolLm3: return "<|im_end|>";
    case ChatFamily::kLlama3: return "<|eot_id|>";
    case ChatFamily::kGemma: return "<end_of_turn>";
    case ChatFamily::kPhi3: return "<|end|>";
    case ChatFamily::kHarmony: return "<|return|>";
    case ChatFamily::kGemma4: return "<turn|>";
    case ChatFamily::kLlama2:
    case ChatFamily::kMistral: return eos_token;
  }
  return eos_token;
}

std::string render_chat(const ChatTemplate& tmpl, const std::vector<ChatMessage>& messages,
                        const std::string& bos_token, const std::string& eos_token, const ChatOptions& options) {
  switch (tmpl.family) {
    case ChatFamily::kChatMl:
    case ChatFamily::kQwen: return render_chatml(tmpl, messages, options);
    case ChatFamily::kHarmony: return render_harmony(tmpl, messages, options);
    case ChatFamily::kLlama3: return render_llama3(tmpl, messages, bos_token);
    case ChatFamily::kLlama2: return render_llama2(messages, bos_token, eos_token);
    case ChatFamily::kGemma: return render_gemma(tmpl, messages, bos_token);
    case ChatFamily::kMistral: return render_mistral(tmpl, messages, bos_token, eos_token);
    case ChatFamily::kPhi3: return render_phi3(tmpl, messages);
    case ChatFamily::kSmolLm3: return render_smollm3(tmpl, messages, options);
    case ChatFamily::kGemma4: return render_gemma4(messages, bos_token, options);
  }
  return "";
}

}  // namespace cbatch
