// The reasoning parsers on hand-written outputs over a small vocabulary: <think> markers as special
// tokens (split by id) and as text; the prompt opening or closing the thinking; a text cut at a stop
// string; harmony's analysis then final messages (which the scripted e2e models cannot emit: their next
// token depends only on the current one); the token that ends the thinking for constraints.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "engine/text/reasoning_parser.hpp"
#include "test_files.hpp"

namespace cbatch {
namespace {

// Token i is pieces[i]; the texts of `specials` encode to their one id and decode to nothing.
class MarkerTokenizer final : public Tokenizer {
 public:
  MarkerTokenizer(std::vector<std::string> pieces, std::vector<std::string> specials)
      : pieces_(std::move(pieces)), specials_(std::move(specials)) {}
  std::vector<int32_t> encode(std::string_view text, bool) const override {
    for (size_t i = 0; i < pieces_.size(); ++i) {
      if (pieces_[i] == text) return {static_cast<int32_t>(i)};
    }
    return {-1, -1};  // not one token
  }
  std::string decode_piece(int32_t, int32_t id) const override { return is_special(id) ? "" : pieces_[static_cast<size_t>(id)]; }
  std::string token_text(int32_t id) const override { return pieces_[static_cast<size_t>(id)]; }
  int vocab_size() const override { return static_cast<int>(pieces_.size()); }
  std::string_view kind() const override { return "byte"; }

  int32_t id(std::string_view text) const { return encode(text, false)[0]; }
  // ids of a sequence of token texts, and the text the engine decodes from them
  std::vector<int32_t> ids(const std::vector<std::string>& texts) const {
    std::vector<int32_t> out;
    for (const std::string& t : texts) out.push_back(id(t));
    return out;
  }

 private:
  bool is_special(int32_t id) const {
    for (const std::string& s : specials_) {
      if (s == pieces_[static_cast<size_t>(id)]) return true;
    }
    return false;
  }
  std::vector<std::string> pieces_;
  std::vector<std::string> specials_;
};

const std::vector<std::string> kPieces = {"<think>", "</think>", "<|im_end|>", "plan", " more", "Yes", "!", "\n",
                                          "<|start|>", "<|channel|>", "<|message|>", "<|end|>", "<|return|>",
                                          "analysis", "final", "assistant", "commentary"};

ReasoningSplit split(const ReasoningParser& p, const MarkerTokenizer& tok, const std::vector<std::string>& prompt,
                     const std::vector<std::string>& output) {
  const std::vector<int32_t> prompt_ids = tok.ids(prompt), output_ids = tok.ids(output);
  return p.split(prompt_ids, output_ids, tok.decode(output_ids, prompt_ids.back()));
}

}  // namespace

TEST_CASE("reasoning parsers: <think> as special tokens, split by id") {
  const MarkerTokenizer tok(kPieces, {"<think>", "</think>", "<|im_end|>"});
  for (const char* name : {"deepseek_r1", "qwen3"}) {
    const ReasoningParser p(name, tok);
    ReasoningSplit s = split(p, tok, {"\n"}, {"<think>", "plan", " more", "</think>", "Yes", "!", "<|im_end|>"});
    CHECK(s.reasoning == "plan more");
    CHECK(s.content == "Yes!");
    s = split(p, tok, {"\n"}, {"<think>", "plan", " more"});  // max_tokens inside the thinking
    CHECK(s.reasoning == "plan more");
    CHECK(s.content.empty());
    s = split(p, tok, {"\n"}, {"Yes", "!"});
    CHECK_FALSE(s.reasoning.has_value());
    CHECK(s.content == "Yes!");
    s = split(p, tok, {"<think>", "\n"}, {"plan", "</think>", "Yes"});  // opened in the prompt
    CHECK(s.reasoning == "plan");
    CHECK(s.content == "Yes");
    s = split(p, tok, {"<think>", "\n"}, {"plan", " more"});
    CHECK(s.reasoning == "plan more");
    CHECK(s.content.empty());
    CHECK(p.prompt_opens_thinking(tok.ids({"<think>", "\n"})));
    CHECK(p.prompt_closes_thinking(tok.ids({"<think>", "\n", "</think>", "\n"})));
    CHECK_FALSE(p.prompt_opens_thinking(tok.ids({"\n"})));
    CHECK_FALSE(p.prompt_closes_thinking(tok.ids({"\n"})));
    // The token that ends the thinking starts a constraint; no other does.
    CHECK(p.ends_thinking(tok.ids({"<think>", "plan", "</think>"}), "plan", 4));
    CHECK_FALSE(p.ends_thinking(tok.ids({"<think>", "plan"}), "plan", 0));
  }
}

TEST_CASE("reasoning parsers: <think> as text (plain added tokens), cut at a stop string") {
  const MarkerTokenizer tok(kPieces, {"<|im_end|>"});
  const ReasoningParser p("qwen3", tok);
  ReasoningSplit s = split(p, tok, {"\n"}, {"<think>", "plan", "</think>", "Yes", "!"});
  CHECK(s.reasoning == "plan");
  CHECK(s.content == "Yes!");
  // The engine's text stops before a stop string: offsets never run past it.
  const std::vector<int32_t> out = tok.ids({"<think>", "plan", "</think>", "Yes", "!"});
  s = p.split(tok.ids({"\n"}), out, "<think>plan</think>Ye");
  CHECK(s.content == "Ye");
  CHECK(p.prompt_opens_thinking(tok.ids({"<think>", "\n"})));
  CHECK(p.ends_thinking(tok.ids({"plan", "</think>"}), "plan</think>", 4));
  CHECK_FALSE(p.ends_thinking(tok.ids({"plan", " more"}), "plan more", 4));
}

TEST_CASE("reasoning parsers: harmony's analysis and final channels (gpt_oss)") {
  const MarkerTokenizer tok(kPieces, {"<|start|>", "<|channel|>", "<|message|>", "<|end|>", "<|return|>"});
  const ReasoningParser p("gpt_oss", tok);
  const std::vector<std::string> prompt = {"<|start|>", "assistant"};
  ReasoningSplit s = split(p, tok, prompt,
                           {"<|channel|>", "analysis", "<|message|>", "plan", " more", "<|end|>", "<|start|>",
                            "assistant", "<|channel|>", "final", "<|message|>", "Yes", "!", "<|return|>"});
  CHECK(s.reasoning == "plan more");
  CHECK(s.content == "Yes!");
  s = split(p, tok, prompt, {"<|channel|>", "analysis", "<|message|>", "plan"});  // unterminated
  CHECK(s.reasoning == "plan");
  CHECK(s.content.empty());
  s = split(p, tok, prompt, {"Yes", "!"});  // no channel at all
  CHECK_FALSE(s.reasoning.has_value());
  CHECK(s.content == "Yes!");
  // A constraint starts at the <|message|> of a final message, not of an analysis one.
  CHECK(p.ends_thinking(tok.ids({"<|end|>", "<|start|>", "assistant", "<|channel|>", "final", "<|message|>"}), "", 0));
  CHECK_FALSE(p.ends_thinking(tok.ids({"<|channel|>", "analysis", "<|message|>"}), "", 0));
  // A vocabulary without harmony's tokens, and an unknown name, are errors that say so.
  const MarkerTokenizer plain({"a", "b"}, {});
  CHECK(test::error_of([&] { ReasoningParser("gpt_oss", plain); }).find("<|channel|>") != std::string::npos);
  CHECK(test::error_of([&] { ReasoningParser("r2", plain); }).find("deepseek_r1, qwen3, gemma4, gpt_oss") != std::string::npos);
}

}  // namespace cbatch

namespace cbatch {

TEST_CASE("reasoning parsers: gemma4's thinking channel, its label dropped; the prompt's empty channel closes it") {
  const std::vector<std::string> pieces = {"<|channel>", "<channel|>", "thought", "\n", "plan", " more", "Yes", "!",
                                           "<|turn>", "model", "<turn|>"};
  // Gemma 4's converter keeps the channel markers visible (rendered as text); found by text here, and by id
  // where a vocabulary makes them special.
  for (const std::vector<std::string>& specials : {std::vector<std::string>{"<turn|>"},
                                                   std::vector<std::string>{"<|channel>", "<channel|>", "<turn|>"}}) {
    const MarkerTokenizer tok(pieces, specials);
    const ReasoningParser p("gemma4", tok);
    ReasoningSplit s = split(p, tok, {"model", "\n"}, {"<|channel>", "thought", "\n", "plan", " more", "<channel|>", "Yes", "!"});
    CHECK(s.reasoning == "plan more");
    CHECK(s.content == "Yes!");
    s = split(p, tok, {"model", "\n"}, {"<|channel>", "thought", "\n", "plan"});  // max_tokens inside the thinking
    CHECK(s.reasoning == "plan");
    CHECK(s.content.empty());
    // thinking off: the prompt ends with an empty channel, the output is all answer
    const std::vector<std::string> closed = {"model", "\n", "<|channel>", "thought", "\n", "<channel|>"};
    CHECK(p.prompt_closes_thinking(tok.ids(closed)));
    s = split(p, tok, closed, {"Yes", "!"});
    CHECK_FALSE(s.reasoning.has_value());
    CHECK(s.content == "Yes!");
    const std::vector<int32_t> out = tok.ids({"<|channel>", "thought", "plan", "<channel|>"});
    const std::string text = tok.decode(out, -1);
    CHECK(p.ends_thinking(out, text, text.size() - (specials.size() > 1 ? 0 : 10)));
  }
  CHECK(is_reasoning_parser_name("gemma4"));
}

}  // namespace cbatch
