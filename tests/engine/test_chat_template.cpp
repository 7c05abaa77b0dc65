// Chat templates: recognition from template text (ChatML default system prompts written with real or
// escaped newlines, Llama 3 with and without the dated system block, Llama 2; the reference templates
// of Gemma 3/2, Qwen2.5, Mistral v0.3/v0.1 and Phi-3/3.5 in tests/e2e/chat_templates), exact
// renderings, the role rules, and ChatFormat's choices: forced names, unknown templates, the
// end-of-turn token of each family (its id in a vocabulary that has it).
#include <doctest/doctest.h>

#include "engine/text/chat_format.hpp"
#include "engine/model/model.hpp"
#include "engine/text/spm_tokenizer.hpp"
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
  // tiny-spm's hf/: <s> and </s> are tokens, its tokenizer_config.json has no chat_template.
  const auto tokenizer = load_tokenizer(ModelSource{test::tiny_spm_path("hf"), "", 0});
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

TEST_CASE("the new families' reference templates are recognized, with their variants") {
  const auto recognize = [](const std::string& file) {
    return recognize_chat_template(test::read_bytes(test::source_path("tests/e2e/chat_templates/" + file)));
  };
  const auto gemma3 = recognize("gemma3.jinja");
  REQUIRE(gemma3);
  CHECK(gemma3->family == ChatFamily::kGemma);
  CHECK_FALSE(gemma3->rejects_system);
  CHECK(recognize("gemma2.jinja")->rejects_system);
  const auto qwen = recognize("qwen2.5.jinja");
  REQUIRE(qwen);
  CHECK(qwen->family == ChatFamily::kQwen);
  CHECK(qwen->default_system == kQwenDefaultSystem);
  const auto mistral = recognize("mistral-v0.3.jinja");
  REQUIRE(mistral);
  CHECK(mistral->family == ChatFamily::kMistral);
  CHECK_FALSE(mistral->mistral_v1);
  CHECK(recognize("mistral-v0.1.jinja")->mistral_v1);
  const auto phi3 = recognize("phi3.jinja");
  REQUIRE(phi3);
  CHECK(phi3->family == ChatFamily::kPhi3);
  CHECK_FALSE(phi3->skips_empty_system);
  CHECK(recognize("phi3.5.jinja")->skips_empty_system);
  CHECK(recognize("llama2.jinja")->family == ChatFamily::kLlama2);  // "[INST]" with "<<SYS>>" stays Llama 2
  CHECK(chat_family_name(ChatFamily::kGemma) == "Gemma");
}

TEST_CASE("the new families render as their templates do") {
  const std::vector<ChatMessage> chat = {{"system", "Sys"}, {"user", " Hi \n"}, {"assistant", " Yo "}, {"user", "Q"}};
  CHECK(render_chat(*chat_template_by_name("gemma"), chat, "<bos>", "<eos>") ==
        "<bos><start_of_turn>user\nSys\n\nHi<end_of_turn>\n<start_of_turn>model\nYo<end_of_turn>\n"
        "<start_of_turn>user\nQ<end_of_turn>\n<start_of_turn>model\n");
  CHECK(render_chat(*chat_template_by_name("qwen"), {{"user", "Hi"}}, "", "") ==
        "<|im_start|>system\n" + std::string(kQwenDefaultSystem) +
            "<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  CHECK(render_chat(*chat_template_by_name("qwen"), {{"user", "Go"}, {"tool", "1"}, {"tool", "2"}}, "", "") ==
        "<|im_start|>system\n" + std::string(kQwenDefaultSystem) +
            "<|im_end|>\n<|im_start|>user\nGo<|im_end|>\n<|im_start|>user\n<tool_response>\n1\n</tool_response>\n"
            "<tool_response>\n2\n</tool_response><|im_end|>\n<|im_start|>assistant\n");
  // Mistral v3: the system prompt goes before the last user message, answers get a space and </s>.
  CHECK(render_chat(*chat_template_by_name("mistral"), chat, "<s>", "</s>") ==
        "<s>[INST]  Hi \n[/INST] Yo</s>[INST] Sys\n\nQ[/INST]");
  CHECK(render_chat(*chat_template_by_name("mistral"), {{"system", "S"}, {"user", "a"}, {"assistant", "b"}}, "<s>",
                    "</s>") == "<s>[INST] a[/INST] b</s>");
  ChatTemplate v1 = *chat_template_by_name("mistral");
  v1.mistral_v1 = true;
  CHECK(render_chat(v1, {{"user", "a"}, {"assistant", "b"}, {"user", "c"}}, "<s>", "</s>") ==
        "<s>[INST] a [/INST]b</s>[INST] c [/INST]");
  CHECK(render_chat(*chat_template_by_name("phi3"), chat, "<s>", "<|endoftext|>") ==
        "<|system|>\nSys<|end|>\n<|user|>\n Hi \n<|end|>\n<|assistant|>\n Yo <|end|>\n<|user|>\nQ<|end|>\n"
        "<|assistant|>\n");

  const auto error = [](const char* name, std::vector<ChatMessage> messages, ChatTemplate* t = nullptr) {
    return test::error_of([&] { render_chat(t ? *t : *chat_template_by_name(name), messages, "<s>", "</s>"); });
  };
  CHECK(error("gemma", {{"user", "a"}, {"user", "b"}}).find("alternating") != std::string::npos);
  CHECK(error("mistral", {{"user", "a"}, {"tool", "b"}}).find("role 'tool'") != std::string::npos);
  CHECK(error("mistral", {{"system", "s"}, {"user", "a"}}, &v1).find("no system message") != std::string::npos);
  ChatTemplate gemma2 = *chat_template_by_name("gemma");
  gemma2.rejects_system = true;
  CHECK(error("gemma", {{"system", "s"}, {"user", "a"}}, &gemma2).find("no system message") != std::string::npos);

  CHECK(end_of_turn_text(ChatFamily::kGemma, "<eos>") == "<end_of_turn>");
  CHECK(end_of_turn_text(ChatFamily::kPhi3, "<|endoftext|>") == "<|end|>");
  CHECK(end_of_turn_text(ChatFamily::kQwen, "<|endoftext|>") == "<|im_end|>");
  CHECK(end_of_turn_text(ChatFamily::kMistral, "</s>") == "</s>");
  CHECK_FALSE(chat_template_by_name("gemma3"));
}

TEST_CASE("SmolLM3's template: recognized before ChatML, its modes, flags and unclosed metadata turn") {
  const auto smol = recognize_chat_template(test::read_bytes(test::source_path("tests/e2e/chat_templates/smollm3.jinja")));
  REQUIRE(smol);
  CHECK(smol->family == ChatFamily::kSmolLm3);
  CHECK(smol->today.size() >= 10);  // "28 November 2026"
  ChatTemplate t = *chat_template_by_name("smollm3");
  t.today = "01 July 2025";
  const std::string metadata = "<|im_start|>system\n## Metadata\n\nKnowledge Cutoff Date: June 2025\nToday Date: 01 July 2025\n";
  const std::string no_think = "<think>\n\n</think>\n";
  // A system message's /no_think wins over enable_thinking; its flags leave the instructions, right-stripped.
  ChatOptions thinking;
  thinking.enable_thinking = true;
  CHECK(render_chat(t, {{"system", "Be brief. /no_think \n"}, {"user", "Hi"}, {"assistant", "\n\nYo\n"}, {"tool", "42"}},
                    "", "", thinking) ==
        metadata + "Reasoning Mode: /no_think\n\n## Custom Instructions\n\nBe brief.\n\n<|im_start|>user\nHi<|im_end|>\n"
                   "<|im_start|>assistant\n" + no_think + "Yo\n<|im_end|>\n<|im_start|>user\n42<|im_end|>\n"
                   "<|im_start|>assistant\n" + no_think);
  ChatOptions off;
  off.enable_thinking = false;
  const std::string plain = render_chat(t, {{"user", "Q"}}, "", "", off);
  CHECK(plain == metadata + "Reasoning Mode: /no_think\n\n## Custom Instructions\n\nYou are a helpful AI assistant "
                            "named SmolLM, trained by Hugging Face.\n\n<|im_start|>user\nQ<|im_end|>\n"
                            "<|im_start|>assistant\n" + no_think);
  const std::string think = render_chat(t, {{"system", "/think"}, {"user", "Q"}}, "", "", off);
  CHECK(think.find("Reasoning Mode: /think\n\n## Custom Instructions\n\nYou are a helpful AI assistant named SmolLM, "
                   "trained by Hugging Face. Your role") != std::string::npos);
  CHECK(think.ends_with("the conclusion.\n\n<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n"));
  CHECK(render_chat(t, {{"system", "Only this. /system_override"}, {"user", "Q"}}, "", "") ==
        "<|im_start|>system\nOnly this.<|im_end|>\n<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n");
  CHECK(end_of_turn_text(ChatFamily::kSmolLm3, "<|end_of_text|>") == "<|im_end|>");
}

TEST_CASE("ChatFormat: a chat of each family stops at its end-of-turn token") {
  SpmVocab v;  // a vocabulary with every family's turn markers as control tokens
  v.pieces = {"<unk>", "<s>", "</s>", "<end_of_turn>", "<|end|>", "<|im_end|>", "<start_of_turn>", "<|user|>",
              "<|im_start|>", "[INST]", "[/INST]", "<|assistant|>"};
  v.types.assign(v.pieces.size(), TokenType::kControl);
  v.types[0] = TokenType::kUnknown;
  v.scores.assign(v.pieces.size(), 0.0f);
  const SpmTokenizer tokenizer(v, "markers");
  const std::pair<const char*, int32_t> cases[] = {{"gemma", 3}, {"phi3", 4}, {"qwen", 5}, {"chatml", 5},
                                                     {"mistral", 2}, {"llama2", 2}};
  for (const auto& entry : cases) {  // no structured binding: clang 14's CAPTURE cannot take one
    const char* name = entry.first;
    const int32_t id = entry.second;
    CAPTURE(name);
    const RenderedChat r = ChatFormat("", name, tokenizer).render({{"user", "x"}});
    CHECK(r.end_of_turn == id);
    CHECK(r.end_of_turn_text == v.pieces[id]);
  }
}

}  // namespace cbatch
