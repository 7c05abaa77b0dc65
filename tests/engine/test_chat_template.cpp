// Chat templates: recognition from template text (ChatML default system prompts written with real or
// escaped newlines, Llama 3 with and without the dated system block, Llama 2), exact renderings, the
// Llama 2 role rule, and ChatFormat's choices: forced names, unknown templates, the end-of-turn token.
#include <doctest/doctest.h>

#include "engine/text/chat_format.hpp"
#include "engine/model/model.hpp"
#include "test_files.hpp"

namespace cbatch {

TEST_CASE("chat templates are recognized from their text") {
  const auto smol = recognize_chat_template(
      "{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are SmolLM<|im_end|>\n' }}"
      "{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}");
  REQUIRE(smol);
  CHECK(smol->family == ChatFamily::kChatMl);
  CHECK(smol->default_system == "You are SmolLM");
  // Escaped newlines inside the Jinja literal; a system turn built from an expression is no default.
  const auto qwen = recognize_chat_template(
      "{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}{%- else %}"
      "{{- '<|im_start|>system\\nYou are Qwen.<|im_end|>\\n' }}");
  REQUIRE(qwen);
  CHECK(qwen->default_system == "You are Qwen.");
  CHECK(recognize_chat_template("{{'<|im_start|>' + m['role']}}")->default_system.empty());
  const auto llama3 = recognize_chat_template("{{ '<|start_header_id|>' + role }}");
  REQUIRE(llama3);
  CHECK(llama3->family == ChatFamily::kLlama3);
  CHECK_FALSE(llama3->dated_system);
  const auto llama31 = recognize_chat_template(
      "{%- set date_string = \"26 Jul 2024\" %}<|start_header_id|>Cutting Knowledge Date: December 2023");
  REQUIRE(llama31);
  CHECK(llama31->dated_system);
  CHECK(llama31->today == "26 Jul 2024");
  CHECK(recognize_chat_template("[INST] <<SYS>>")->family == ChatFamily::kLlama2);
  CHECK_FALSE(recognize_chat_template("{{ '<|user|>' + content }}"));
  CHECK_FALSE(recognize_chat_template(""));
}

TEST_CASE("chat rendering") {
  const std::vector<ChatMessage> chat = {{"system", "Sys"}, {"user", " Hi \n"}, {"assistant", "Yo"}, {"user", "Q"}};
  ChatTemplate chatml = *chat_template_by_name("chatml");
  CHECK(render_chat(chatml, chat, "<s>", "</s>") ==
        "<|im_start|>system\nSys<|im_end|>\n<|im_start|>user\n Hi \n<|im_end|>\n<|im_start|>assistant\nYo<|im_end|>\n"
        "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n");
  chatml.default_system = "Default";
  CHECK(render_chat(chatml, {{"user", "Hi"}}, "", "") ==
        "<|im_start|>system\nDefault<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  CHECK(render_chat(*chat_template_by_name("llama3"), {{"user", " Hi \n"}}, "<|begin_of_text|>", "") ==
        "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n");
  CHECK(render_chat(*chat_template_by_name("llama2"), chat, "<s>", "</s>") ==
        "<s>[INST] <<SYS>>\nSys\n<</SYS>>\n\n Hi [/INST] Yo </s><s>[INST] Q [/INST]");
  const std::string message = test::error_of([] {
    render_chat(*chat_template_by_name("llama2"), {{"user", "a"}, {"user", "b"}}, "<s>", "</s>");
  });
  CHECK(message.find("alternating") != std::string::npos);
  CHECK(end_of_turn_text(ChatFamily::kChatMl, "</s>") == "<|im_end|>");
  CHECK(end_of_turn_text(ChatFamily::kLlama2, "</s>") == "</s>");
}

TEST_CASE("ChatFormat: the model's template, --chat-template, and clear errors") {
  const std::string& hf = test::kAidreamsHf;
  if (!test::have_files({hf})) return;
  const auto tokenizer = load_tokenizer(ModelSource{hf, "", 0});
  const ChatFormat none("", "", *tokenizer);
  CHECK_FALSE(none.is_available());
  CHECK(none.unavailable_reason().find("--chat-template") != std::string::npos);
  CHECK(test::error_of([&] { none.render({{"user", "x"}}); }).find("--chat-template") != std::string::npos);
  const ChatFormat unknown("{{ '<|user|>' }}", "", *tokenizer);
  CHECK(unknown.unavailable_reason().find("not one cbatch recognizes") != std::string::npos);
  CHECK(test::error_of([&] { ChatFormat bad("", "vicuna", *tokenizer); }).find("--chat-template vicuna") !=
        std::string::npos);

  const ChatFormat llama2("", "llama2", *tokenizer);  // </s> is a token of this vocabulary: it ends turns
  const RenderedChat r = llama2.render({{"user", "Hi"}});
  CHECK(r.text == "<s>[INST] Hi [/INST]");
  CHECK(r.ids.front() == 1);  // "<s>" in the text is the BOS id, not added a second time
  CHECK(std::count(r.ids.begin(), r.ids.end(), 1) == 1);
  CHECK(r.end_of_turn == 2);
  const ChatFormat chatml("", "chatml", *tokenizer);  // no <|im_end|> token: it stops as a string
  CHECK(chatml.render({{"user", "Hi"}}).end_of_turn == -1);
  CHECK(chatml.render({{"user", "Hi"}}).end_of_turn_text == "<|im_end|>");
}

}  // namespace cbatch
