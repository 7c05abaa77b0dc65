// Recognition and rendering of the ChatML, Llama 3 and Llama 2 chat templates. Each renderer follows
// the reference Jinja template line by line; Jinja's `trim` and Python's strip() remove Unicode
// whitespace at both ends.
#include "engine/text/chat_template.hpp"

#include <ctime>

#include "engine/core/error.hpp"
#include "engine/text/unicode.hpp"

namespace cbatch {
namespace {

bool contains(std::string_view text, std::string_view part) { return text.find(part) != std::string_view::npos; }

bool is_python_space(uint32_t cp) { return unicode::is_whitespace(cp) || (cp >= 0x1C && cp <= 0x1F); }

std::string strip(const std::string& text) {
  const unicode::Codepoints cps = unicode::decode_utf8(text);
  size_t begin = 0, end = cps.cps.size();
  while (begin < end && is_python_space(cps.cps[begin])) ++begin;
  while (end > begin && is_python_space(cps.cps[end - 1])) --end;
  return text.substr(cps.offsets[begin], cps.offsets[end] - cps.offsets[begin]);
}

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

std::string render_chatml(const ChatTemplate& t, const std::vector<ChatMessage>& messages) {
  std::string out;
  if (!messages.empty() && messages[0].role != "system" && !t.default_system.empty()) {
    out += "<|im_start|>system\n" + t.default_system + "<|im_end|>\n";
  }
  for (const ChatMessage& m : messages) out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
  return out + "<|im_start|>assistant\n";
}

std::string llama3_turn(const std::string& role, const std::string& content) {
  return "<|start_header_id|>" + role + "<|end_header_id|>\n\n" + strip(content) + "<|eot_id|>";
}

std::string render_llama3(const ChatTemplate& t, const std::vector<ChatMessage>& messages, const std::string& bos) {
  std::string out = bos;
  size_t first = 0;
  if (t.dated_system) {
    const bool has_system = !messages.empty() && messages[0].role == "system";
    const std::string system = has_system ? messages[0].content : "";
    first = has_system ? 1 : 0;
    out += "<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: " +
           t.today + "\n\n" + strip(system) + "<|eot_id|>";
  }
  for (size_t i = first; i < messages.size(); ++i) out += llama3_turn(messages[i].role, messages[i].content);
  return out + "<|start_header_id|>assistant<|end_header_id|>\n\n";
}

// As the reference template: a user message must sit at every even position after the optional
// system message (else it raises); messages with other roles at odd positions render nothing.
std::string render_llama2(const std::vector<ChatMessage>& messages, const std::string& bos, const std::string& eos) {
  const bool has_system = !messages.empty() && messages[0].role == "system";
  std::string out;
  for (size_t i = has_system ? 1 : 0, turn = 0; i < messages.size(); ++i, ++turn) {
    const ChatMessage& m = messages[i];
    if ((m.role == "user") != (turn % 2 == 0)) {
      throw Error("the llama2 chat template needs roles alternating user/assistant/user/... after an optional "
                  "system message; message " + std::to_string(i) + " has role '" + m.role + "'");
    }
    std::string content = m.content;
    if (turn == 0 && has_system) content = "<<SYS>>\n" + messages[0].content + "\n<</SYS>>\n\n" + content;
    if (m.role == "user") {
      out += bos + "[INST] " + strip(content) + " [/INST]";
    } else if (m.role == "assistant") {
      out += ' ';
      out += strip(content) + " " + eos;
    }
  }
  return out;
}

}  // namespace

std::optional<ChatTemplate> recognize_chat_template(std::string_view jinja) {
  ChatTemplate t;
  if (contains(jinja, "<|im_start|>")) {
    t.family = ChatFamily::kChatMl;
    t.default_system = default_chatml_system(jinja);
  } else if (contains(jinja, "<|start_header_id|>")) {
    t.family = ChatFamily::kLlama3;
    t.dated_system = contains(jinja, "Cutting Knowledge Date");
    if (t.dated_system) t.today = llama3_today(jinja);
  } else if (contains(jinja, "[INST]") && contains(jinja, "<<SYS>>")) {
    t.family = ChatFamily::kLlama2;
  } else {
    return std::nullopt;
  }
  return t;
}

std::optional<ChatTemplate> chat_template_by_name(std::string_view name) {
  ChatTemplate t;
  if (name == "chatml") {
    t.family = ChatFamily::kChatMl;
  } else if (name == "llama3") {
    t.family = ChatFamily::kLlama3;
  } else if (name == "llama2") {
    t.family = ChatFamily::kLlama2;
  } else {
    return std::nullopt;
  }
  return t;
}

std::string end_of_turn_text(ChatFamily family, const std::string& eos_token) {
  switch (family) {
    case ChatFamily::kChatMl: return "<|im_end|>";
    case ChatFamily::kLlama3: return "<|eot_id|>";
    case ChatFamily::kLlama2: return eos_token;
  }
  return eos_token;
}

std::string render_chat(const ChatTemplate& tmpl, const std::vector<ChatMessage>& messages,
                        const std::string& bos_token, const std::string& eos_token) {
  switch (tmpl.family) {
    case ChatFamily::kChatMl: return render_chatml(tmpl, messages);
    case ChatFamily::kLlama3: return render_llama3(tmpl, messages, bos_token);
    case ChatFamily::kLlama2: return render_llama2(messages, bos_token, eos_token);
  }
  return "";
}

}  // namespace cbatch
