// Choosing the chat template of a run and rendering chats to token ids.
#include "engine/text/chat_format.hpp"

#include "engine/base/elide.hpp"
#include "engine/base/error.hpp"

namespace cbatch {

ChatFormat::ChatFormat(const std::string& model_template, const std::string& forced_name,
                       const Tokenizer& tokenizer)
    : tokenizer_(tokenizer) {
  const std::optional<ChatTemplate> recognized = recognize_chat_template(model_template);
  if (!forced_name.empty()) {
    template_ = chat_template_by_name(forced_name);
    if (!template_) {
      throw Error("--chat-template " + elide(forced_name) + " is not a template cbatch knows (" +
                  chat_template_names_text() + ")");
    }
    // The model's own template of the same family keeps its details (default system prompt, dates).
    if (recognized && recognized->family == template_->family) template_ = recognized;
  } else if (recognized) {
    template_ = recognized;
  } else if (model_template.empty()) {
    unavailable_ = "this model has no chat template: pass --chat-template NAME (" + chat_template_names_text() + ")";
  } else {
    unavailable_ = std::string("this model's chat template is not one cbatch recognizes (ChatML, Qwen, Llama 3, "
                               "Llama 2, Gemma, Mistral, Phi-3, harmony, SmolLM3, Gemma 4): pass --chat-template NAME (") +
                   chat_template_names_text() + ") to use one of those";
  }
  if (!template_) return;
  bos_text_ = tokenizer.token_text(tokenizer.bos_id());
  eos_text_ = tokenizer.eos_ids().empty() ? "" : tokenizer.token_text(tokenizer.eos_ids().front());
  end_of_turn_text_ = end_of_turn_text(template_->family, eos_text_);
  const std::vector<int32_t> ids = tokenizer.encode(end_of_turn_text_, false);
  if (ids.size() == 1 && tokenizer.token_text(ids[0]) == end_of_turn_text_) end_of_turn_id_ = ids[0];
  if (template_->family == ChatFamily::kHarmony) {
    const std::vector<int32_t> call = tokenizer.encode("<|call|>", false);
    if (call.size() == 1 && tokenizer.token_text(call[0]) == "<|call|>") more_stop_ids_.push_back(call[0]);
  }
}

RenderedChat ChatFormat::render(const std::vector<ChatMessage>& messages, const ChatOptions& options) const {
  if (!template_) throw Error("chat messages cannot be rendered: " + unavailable_);
  RenderedChat out;
  out.text = render_chat(*template_, messages, bos_text_, eos_text_, options);
  out.ids = tokenizer_.encode(out.text, /*add_special=*/false);
  out.end_of_turn = end_of_turn_id_;
  out.end_of_turn_text = end_of_turn_text_;
  out.more_stop_ids = more_stop_ids_;
  return out;
}

}  // namespace cbatch
