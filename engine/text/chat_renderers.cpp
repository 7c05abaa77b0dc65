// Rendering of each chat template family, as its reference template renders a chat with
// add_generation_prompt. Templates that raise for a chat (roles out of order, a system message they
// do not take) throw cbatch::Error with the reason.
#include "engine/text/chat_renderers.hpp"

#include <string_view>

#include "engine/base/elide.hpp"
#include "engine/base/error.hpp"
#include "engine/text/unicode.hpp"

namespace cbatch {
namespace {

bool is_python_space(uint32_t cp) { return unicode::is_whitespace(cp) || (cp >= 0x1C && cp <= 0x1F); }

std::string strip(const std::string& text) {
  const unicode::Codepoints cps = unicode::decode_utf8(text);
  size_t begin = 0, end = cps.cps.size();
  while (begin < end && is_python_space(cps.cps[begin])) ++begin;
  while (end > begin && is_python_space(cps.cps[end - 1])) --end;
  return text.substr(cps.offsets[begin], cps.offsets[end] - cps.offsets[begin]);
}

bool has_system(const std::vector<ChatMessage>& messages) { return !messages.empty() && messages[0].role == "system"; }

// The rule of the Llama 2, Gemma and Mistral templates: after the optional system message, user at
// even positions and no user at odd ones (Mistral also rejects roles other than user and assistant).
void check_alternation(const std::vector<ChatMessage>& messages, const char* family, bool only_user_assistant) {
  for (size_t i = has_system(messages) ? 1 : 0, turn = 0; i < messages.size(); ++i, ++turn) {
    const std::string& role = messages[i].role;
    if ((role == "user") != (turn % 2 == 0) || (only_user_assistant && role != "user" && role != "assistant")) {
      throw Error(std::string("the ") + family + " chat template needs roles alternating user/assistant/user/... "
                  "after an optional system message; message " + std::to_string(i) + " has role '" + elide(role) + "'");
    }
  }
}

void reject_system(const std::vector<ChatMessage>& messages, const char* family) {
  if (has_system(messages)) throw Error(std::string("the ") + family + " chat template takes no system message");
}

std::string llama3_turn(const std::string& role, const std::string& content) {
  return "<|start_header_id|>" + role + "<|end_header_id|>\n\n" + strip(content) + "<|eot_id|>";
}

std::string strip_newlines(const std::string& text, bool left, bool right) {
  size_t begin = 0, end = text.size();
  while (left && begin < end && text[begin] == '\n') ++begin;
  while (right && end > begin && text[end - 1] == '\n') --end;
  return text.substr(begin, end - begin);
}

// Qwen3: the last user message that is not a wrapped tool response; assistant turns after it keep
// their thinking.
size_t qwen3_last_query(const std::vector<ChatMessage>& messages) {
  for (size_t i = messages.size(); i-- > 0;) {
    const std::string& c = messages[i].content;
    const bool tool_response = c.starts_with("<tool_response>") && c.ends_with("</tool_response>");
    if (messages[i].role == "user" && !tool_response) return i;
  }
  return messages.size() - 1;
}

// Qwen3's assistant turn: a "<think>...</think>" in the content is taken apart; the thinking is
// written back only after the last user query (and always for the chat's last message), else dropped.
std::string qwen3_assistant_turn(std::string content, bool after_last_query, bool is_last) {
  std::string reasoning;
  if (const size_t end = content.find("</think>"); end != std::string::npos) {
    std::string before = strip_newlines(content.substr(0, end), false, true);
    if (const size_t open = before.rfind("<think>"); open != std::string::npos) before = before.substr(open + 7);
    reasoning = strip_newlines(before, true, false);
    content = strip_newlines(content.substr(content.rfind("</think>") + 8), true, false);
  }
  if (after_last_query && (is_last || !reasoning.empty())) {
    return "<|im_start|>assistant\n<think>\n" + strip_newlines(reasoning, true, true) + "\n</think>\n\n" +
           strip_newlines(content, true, false) + "<|im_end|>\n";
  }
  return "<|im_start|>assistant\n" + content + "<|im_end|>\n";
}

std::string rstrip(const std::string& text) {
  const unicode::Codepoints cps = unicode::decode_utf8(text);
  size_t end = cps.cps.size();
  while (end > 0 && is_python_space(cps.cps[end - 1])) --end;
  return text.substr(0, cps.offsets[end]);
}

std::string erase_all(std::string text, std::string_view from) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at)) text.erase(at, from.size());
  return text;
}

// SmolLM3's custom instructions when the system message gives none, by reasoning mode.
constexpr const char* kSmolLm3Thinking =
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face. Your role as an assistant involves "
    "thoroughly exploring questions through a systematic thinking process before providing the final precise and "
    "accurate solutions. This requires engaging in a comprehensive cycle of analysis, summarizing, exploration, "
    "reassessment, reflection, backtracking, and iteration to develop well-considered thinking process. Please "
    "structure your response into two main sections: Thought and Solution using the specified format: <think> "
    "Thought section </think> Solution section. In the Thought section, detail your reasoning process in steps. "
    "Each step should include detailed considerations such as analysing questions, summarizing relevant findings, "
    "brainstorming new ideas, verifying the accuracy of the current steps, refining any errors, and revisiting "
    "previous steps. In the Solution section, based on various attempts, explorations, and reflections from the "
    "Thought section, systematically present the final solution that you deem correct. The Solution section should "
    "be logical, accurate, and concise and detail necessary steps needed to reach the conclusion.";
constexpr const char* kSmolLm3Plain = "You are a helpful AI assistant named SmolLM, trained by Hugging Face.";

}  // namespace

// ChatML; Qwen's templates put a run of tool messages into one user turn of <tool_response> blocks.
// Qwen3 (thinking_switch) takes the thinking out of earlier assistant turns, and its generation prompt
// closes an empty think block when enable_thinking is false; R1-style templates open one.
std::string render_chatml(const ChatTemplate& t, const std::vector<ChatMessage>& messages, const ChatOptions& options) {
  std::string out;
  if (!messages.empty() && messages[0].role != "system" && !t.default_system.empty()) {
    out += "<|im_start|>system\n" + t.default_system + "<|im_end|>\n";
  }
  const size_t last_query = t.thinking_switch ? qwen3_last_query(messages) : 0;
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (t.thinking_switch && m.role == "assistant") {
      out += qwen3_assistant_turn(m.content, i > last_query, i + 1 == messages.size());
      continue;
    }
    if (t.family != ChatFamily::kQwen || m.role != "tool") {
      out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
      continue;
    }
    if (i == 0 || messages[i - 1].role != "tool") out += "<|im_start|>user";
    out += "\n<tool_response>\n" + m.content + "\n</tool_response>";
    if (i + 1 == messages.size() || messages[i + 1].role != "tool") out += "<|im_end|>\n";
  }
  out += "<|im_start|>assistant\n";
  if (t.thinking_switch && options.enable_thinking == false) return out + "<think>\n\n</think>\n\n";
  if (t.opens_thinking) out += "<think>\n";
  return out;
}

// gpt-oss's harmony format, as its chat template writes it: a system message with the model identity,
// dates and reasoning effort, the chat's first system (or developer) message as the developer's
// instructions, then user and assistant (final channel) messages, and "<|start|>assistant" to generate.
std::string render_harmony(const ChatTemplate& t, const std::vector<ChatMessage>& messages, const ChatOptions& options) {
  const std::string& effort = options.reasoning_effort.empty() ? std::string("medium") : options.reasoning_effort;
  if (effort != "low" && effort != "medium" && effort != "high") {
    throw Error("reasoning_effort " + elide(effort) + " is not one of low, medium, high");
  }
  std::string out = "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n"
                    "Knowledge cutoff: 2024-06\nCurrent date: " + t.today + "\n\nReasoning: " + effort +
                    "\n\n# Valid channels: analysis, commentary, final. Channel must be included for every message.<|end|>";
  size_t first = 0;
  if (!messages.empty() && (messages[0].role == "system" || messages[0].role == "developer")) {
    out += "<|start|>developer<|message|># Instructions\n\n" + messages[0].content + "<|end|>";
    first = 1;
  }
  for (size_t i = first; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "assistant") {
      out += "<|start|>assistant<|channel|>final<|message|>" + m.content + "<|end|>";
    } else if (m.role == "user") {
      out += "<|start|>user<|message|>" + m.content + "<|end|>";
    } else {
      throw Error("the harmony chat format takes a system or developer message first, then user and assistant "
                  "messages; message " + std::to_string(i) + " has role '" + elide(m.role) + "'");
    }
  }
  return out + "<|start|>assistant";
}

std::string render_llama3(const ChatTemplate& t, const std::vector<ChatMessage>& messages, const std::string& bos) {
  std::string out = bos;
  size_t first = 0;
  if (t.dated_system) {
    const std::string system = has_system(messages) ? messages[0].content : "";
    first = has_system(messages) ? 1 : 0;
    out += "<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: " +
           t.today + "\n\n" + strip(system) + "<|eot_id|>";
  }
  for (size_t i = first; i < messages.size(); ++i) out += llama3_turn(messages[i].role, messages[i].content);
  return out + "<|start_header_id|>assistant<|end_header_id|>\n\n";
}

std::string render_llama2(const std::vector<ChatMessage>& messages, const std::string& bos, const std::string& eos) {
  check_alternation(messages, "llama2", false);
  const bool system = has_system(messages);
  std::string out;
  for (size_t i = system ? 1 : 0, turn = 0; i < messages.size(); ++i, ++turn) {
    const ChatMessage& m = messages[i];
    std::string content = m.content;
    if (turn == 0 && system) content = "<<SYS>>\n" + messages[0].content + "\n<</SYS>>\n\n" + content;
    if (m.role == "user") {
      out += bos + "[INST] " + strip(content) + " [/INST]";
    } else if (m.role == "assistant") {
      out += ' ';  // (appended apart: GCC 12 warns falsely on " " + std::string&&)
      out += strip(content) + " " + eos;
    }  // other roles at odd positions render nothing
  }
  return out;
}

// Gemma 3: "<start_of_turn>user\n" turns, assistant as "model", contents trimmed; the system prompt
// and a blank line open the first turn (Gemma 2's template rejects a system message).
std::string render_gemma(const ChatTemplate& t, const std::vector<ChatMessage>& messages, const std::string& bos) {
  if (t.rejects_system) reject_system(messages, "gemma");
  check_alternation(messages, "gemma", false);
  const bool system = has_system(messages);
  std::string out = bos;
  for (size_t i = system ? 1 : 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    out += "<start_of_turn>" + std::string(m.role == "assistant" ? "model" : m.role) + "\n";
    if (system && i == 1) out += messages[0].content + "\n\n";
    out += strip(m.content) + "<end_of_turn>\n";
  }
  return out + "<start_of_turn>model\n";
}

// Mistral 7B Instruct v0.3 ("v3"): "[INST] x[/INST]", answers " x</s>", the system prompt and a blank
// line before the last user message when the chat ends with it. v0.1/v0.2 ("v1"): "[INST] x [/INST]",
// answers "x</s>", no system message. Neither has a generation prompt: "[/INST]" ends the prompt.
std::string render_mistral(const ChatTemplate& t, const std::vector<ChatMessage>& messages, const std::string& bos,
                           const std::string& eos) {
  if (t.mistral_v1) reject_system(messages, "mistral (v0.1)");
  check_alternation(messages, "mistral", true);
  const bool system = has_system(messages);
  std::string out = bos;
  for (size_t i = system ? 1 : 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "assistant") {
      if (!t.mistral_v1) out += ' ';
      out += (t.mistral_v1 ? m.content : strip(m.content)) + eos;
    } else if (t.mistral_v1) {
      out += "[INST] " + m.content + " [/INST]";
    } else {
      const bool with_system = system && i + 1 == messages.size();
      out += "[INST] " + (with_system ? messages[0].content + "\n\n" : std::string()) + m.content + "[/INST]";
    }
  }
  return out;
}

// Phi-3: "<|system|>\n", "<|user|>\n" and "<|assistant|>\n" turns ended by "<|end|>\n"; other roles
// render nothing.
std::string render_phi3(const ChatTemplate& t, const std::vector<ChatMessage>& messages) {
  std::string out;
  for (const ChatMessage& m : messages) {
    if (m.role != "system" && m.role != "user" && m.role != "assistant") continue;
    if (m.role == "system" && t.skips_empty_system && m.content.empty()) continue;
    out += "<|" + m.role + "|>\n" + m.content + "<|end|>\n";
  }
  return out + "<|assistant|>\n";
}

// SmolLM3: a system turn of metadata (knowledge cutoff, today, reasoning mode) and custom instructions (the
// system message without its /no_think and /think flags, else the mode's default), or with /system_override
// the instructions alone; then user, tool (as user) and assistant turns, the latter with an empty think block
// in /no_think mode. The mode is enable_thinking (default on) unless the system message names one. As the
// published template does, the metadata turn is closed only when tools are listed, which cbatch never does.
std::string render_smollm3(const ChatTemplate& t, const std::vector<ChatMessage>& messages, const ChatOptions& options) {
  bool thinking = options.enable_thinking.value_or(true);
  const std::string& system = has_system(messages) ? messages[0].content : std::string();
  if (system.find("/no_think") != std::string::npos) {
    thinking = false;
  } else if (system.find("/think") != std::string::npos) {
    thinking = true;
  }
  const std::string custom = rstrip(erase_all(erase_all(system, "/no_think"), "/think"));
  const std::string empty_think = thinking ? "" : "<think>\n\n</think>\n";
  std::string out = "<|im_start|>system\n";
  if (system.find("/system_override") != std::string::npos) {
    out += rstrip(erase_all(custom, "/system_override")) + "<|im_end|>\n";
  } else {
    out += "## Metadata\n\nKnowledge Cutoff Date: June 2025\nToday Date: " + t.today + "\nReasoning Mode: " +
           (thinking ? "/think" : "/no_think") + "\n\n## Custom Instructions\n\n" +
           (!custom.empty() ? custom : thinking ? kSmolLm3Thinking : kSmolLm3Plain) + "\n\n";
  }
  for (const ChatMessage& m : messages) {
    if (m.role == "user" || m.role == "tool") {
      out += "<|im_start|>user\n" + m.content + "<|im_end|>\n";
    } else if (m.role == "assistant") {
      out += "<|im_start|>assistant\n" + empty_think + strip_newlines(m.content, true, false) + "<|im_end|>\n";
    }  // system messages: in the system turn (the first) or nowhere
  }
  return out + "<|im_start|>assistant\n" + empty_think;
}

// Gemma 4 (its chat_template.jinja, text turns; tool calls and their responses are not rendered): a system
// turn when thinking is on or the chat starts with a system (or developer) message, "<|think|>\n" at its top
// when thinking is on; "<|turn>ROLE\n" (assistant: model; not repeated for consecutive assistant messages,
// tool messages skipped) + the content trimmed (an answer's thinking channels <|channel>...<channel|> cut
// out) + "<turn|>\n"; then "<|turn>model\n", with an empty thought channel when thinking is off (the default).
std::string render_gemma4(const std::vector<ChatMessage>& messages, const std::string& bos, const ChatOptions& options) {
  const bool thinking = options.enable_thinking.value_or(false);
  const bool system = !messages.empty() && (messages[0].role == "system" || messages[0].role == "developer");
  std::string out = bos;
  if (thinking || system) {
    out += "<|turn>system\n" + std::string(thinking ? "<|think|>\n" : "") + (system ? strip(messages[0].content) : "") +
           "<turn|>\n";
  }
  std::string prev_role;
  for (size_t i = system ? 1 : 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "tool") continue;
    if (m.role != "assistant" || prev_role != "assistant") out += "<|turn>" + (m.role == "assistant" ? std::string("model") : m.role) + "\n";
    if (m.role == "assistant") {
      std::string answer;  // Jinja's strip_thinking: each part before <channel|>, up to its <|channel>
      size_t at = 0;
      while (true) {
        const size_t end = m.content.find("<channel|>", at);
        const std::string part = m.content.substr(at, end == std::string::npos ? std::string::npos : end - at);
        answer += part.substr(0, part.find("<|channel>"));
        if (end == std::string::npos) break;
        at = end + 10;
      }
      out += strip(answer);
    } else {
      out += strip(m.content);
    }
    out += "<turn|>\n";
    prev_role = m.role;
  }
  return out + "<|turn>model\n" + (thinking ? "" : "<|channel>thought\n<channel|>");
}

}  // namespace cbatch
