// The SentencePiece tokenizer against independent goldens: tiny-spm's golden/tokenize.jsonl (Hugging Face
// `tokenizers` on its hf/tokenizer.json) and greedy.jsonl (prompt ids and `tokenizers`' decoding of the
// float64 reference's outputs), read from its GGUF, its llama2.c tokenizer.bin and its Hugging Face
// directory; with the optional shared data, llama.cpp's llama-spm suite (Hugging Face ids of the Llama 2
// vocabulary) as extra cases. Plus decoding rules, a long-input round trip, the family options (no dummy
// prefix as Gemma, first-fragment prefix as Mistral v3, rstrip as Phi-3) on a small vocabulary, and the
// special-token matcher's lstrip / rstrip.
#include <doctest/doctest.h>
#include <simdjson.h>

#include <functional>

#include "engine/model/model.hpp"
#include "engine/text/spm_tokenizer.hpp"
#include "test_files.hpp"

namespace cbatch {
namespace {

using test::have_files;
using test::shared_path;
using test::tiny_spm_path;

// tiny-spm's tokenizer in each of its three formats.
const char* const kFormats[] = {"gguf", "llama2c", "hf"};

std::unique_ptr<Tokenizer> tiny_spm_tokenizer(std::string_view format) {
  ModelSource source;
  if (format == "gguf") {
    source.path = tiny_spm_path("tiny-spm.gguf");
  } else if (format == "llama2c") {
    source.path = tiny_spm_path("tiny-spm.bin");
    source.tokenizer_path = tiny_spm_path("tokenizer.bin");
  } else {
    source.path = tiny_spm_path("hf");
  }
  return load_tokenizer(source);
}

std::vector<int32_t> to_ids(simdjson::dom::array array) {
  std::vector<int32_t> ids;
  for (simdjson::dom::element e : array) ids.push_back(static_cast<int32_t>(int64_t(e)));
  return ids;
}

// Calls fn on each line of a golden file but its {"generated_by": ...} header; returns how many.
int for_each_golden_line(const std::string& path, const std::function<void(simdjson::dom::element)>& fn) {
  simdjson::dom::parser parser;  // each line's element lives until the next line is parsed
  int lines = 0;
  for (simdjson::dom::element line : parser.load_many(path)) {
    if (!line["generated_by"].error()) continue;
    fn(line);
    ++lines;
  }
  return lines;
}

constexpr int32_t kSpace = 470;  // tiny-spm's "▁"

}  // namespace

TEST_CASE("llama tokenizer reproduces tiny-spm's golden/tokenize.jsonl from the GGUF, tokenizer.bin and tokenizer.json") {
  const std::string golden = tiny_spm_path("golden/tokenize.jsonl");
  for (const char* format : kFormats) {
    const auto tokenizer = tiny_spm_tokenizer(format);
    CHECK(tokenizer->kind() == "llama");
    CHECK(tokenizer->vocab_size() == 512);
    CHECK(tokenizer->bos_id() == 1);
    CHECK(tokenizer->is_eos(2));
    const int cases = for_each_golden_line(golden, [&](simdjson::dom::element line) {
      const std::string_view text = line["text"];
      const std::vector<int32_t> ids = to_ids(line["ids"]);
      INFO("format=" << format << " text=" << text);
      CHECK(tokenizer->encode(text, true) == ids);
      // Decoding after nothing drops the dummy-prefix space (the piece follows BOS): a round trip, where
      // no special-token text became a control id (those decode to nothing).
      if (std::count_if(ids.begin(), ids.end(), [](int32_t id) { return id <= 2; }) == 1) {
        CHECK(tokenizer->decode(ids) == text);
      }
    });
    CHECK(cases >= 50);
  }
}

TEST_CASE("llama tokenizer encodes tiny-spm's greedy prompts and decodes the greedy outputs") {
  const std::string golden = tiny_spm_path("golden/greedy.jsonl");
  for (const char* format : kFormats) {
    const auto tokenizer = tiny_spm_tokenizer(format);
    const int cases = for_each_golden_line(golden, [&](simdjson::dom::element line) {
      const std::string_view prompt = line["prompt"];
      const std::vector<int32_t> prompt_ids = to_ids(line["prompt_ids"]);
      std::vector<int32_t> output_ids = to_ids(line["output_ids"]);
      INFO("format=" << format << " prompt=" << prompt);
      CHECK(tokenizer->encode(prompt, true) == prompt_ids);
      if (!output_ids.empty() && output_ids.back() == 2) output_ids.pop_back();
      CHECK(tokenizer->decode(output_ids, prompt_ids.back()) == std::string_view(line["output_text"]));
    });
    CHECK(cases >= 10);
  }
}

TEST_CASE("llama tokenizer reproduces llama.cpp's ggml-vocab-llama-spm suite") {
  const std::string vocab = shared_path("tokenizers/ggml-vocab-llama-spm.gguf");
  if (!have_files({vocab, vocab + ".inp", vocab + ".out"})) return;
  const auto tokenizer = load_tokenizer(ModelSource{vocab, "", 0});
  CHECK(tokenizer->vocab_size() == 32000);
  const test::VocabSuite suite = test::read_vocab_suite(vocab);
  for (size_t i = 0; i < suite.texts.size(); ++i) {
    INFO("case " << i << ": [" << suite.texts[i] << "]");
    CHECK(tokenizer->encode(suite.texts[i], false) == suite.ids[i]);
  }
  // add_special follows the file's flags: BOS yes (add_bos_token), EOS no.
  CHECK(tokenizer->encode("Hello", true) == std::vector<int32_t>{1, 15043});
  CHECK(tokenizer->encode("", true) == std::vector<int32_t>{1});
  CHECK(tokenizer->encode("", false).empty());
}

TEST_CASE("llama tokenizer decoding: spaces, byte tokens, control tokens") {
  const auto tok = tiny_spm_tokenizer("gguf");
  CHECK(tok->decode_piece(-1, kSpace) == " ");
  CHECK(tok->decode_piece(1, kSpace).empty());   // the first piece after BOS loses its space
  CHECK(tok->decode_piece(1, 3 + 0x20) == " ");  // but a byte token keeps its byte
  CHECK(tok->decode_piece(-1, 3 + 0xE6) == "\xE6");
  CHECK(tok->decode_piece(-1, 0).empty());
  CHECK(tok->decode_piece(-1, 1).empty());
  CHECK(tok->decode_piece(-1, 2).empty());
  CHECK_THROWS_AS(tok->decode_piece(-1, 512), Error);
  // Special-token text becomes the control id (as Hugging Face encodes it); the text after it gets the
  // dummy prefix again.
  CHECK(tok->encode("<s>", false) == std::vector<int32_t>{1});
  const std::vector<int32_t> ids = tok->encode("a</s>b<unk>", false);
  REQUIRE(ids.size() >= 4);
  CHECK(ids.back() == 0);
  CHECK(std::count(ids.begin(), ids.end(), 2) == 1);
  CHECK(tok->decode(ids) == " a b");
  const std::vector<int32_t> partial = tok->encode("<s", false);  // not a special token's text
  CHECK(std::find(partial.begin(), partial.end(), 1) == partial.end());
  CHECK(tok->decode(partial) == " <s");
}

TEST_CASE("llama tokenizer handles long inputs (priority-queue merges)") {
  const auto tok = tiny_spm_tokenizer("gguf");
  // A line of tiny-spm's training corpus and its ids from Hugging Face `tokenizers` on tiny-spm's
  // tokenizer.json. No merge crosses a "▁", so the line repeated after spaces repeats its ids.
  const std::string line = "I dreamed of a quiet city where the robots sang softly under glass rivers and memory light.";
  const std::vector<int32_t> line_ids = {284, 316, 297, 279, 261, 470, 510, 487, 479, 310, 426, 262,
                                         260, 266, 263, 443, 476, 265, 333, 381, 486, 473, 328, 449,
                                         431, 386, 378, 476, 270, 332, 483, 410, 375, 490};
  CHECK(tok->encode(line, false) == line_ids);
  std::string text = line;
  std::vector<int32_t> expected = {1};
  expected.insert(expected.end(), line_ids.begin(), line_ids.end());
  while (text.size() < (1 << 20)) {
    text += " " + line;
    expected.insert(expected.end(), line_ids.begin(), line_ids.end());
  }
  const std::vector<int32_t> ids = tok->encode(text, true);
  CHECK(ids.size() == expected.size());
  CHECK(ids == expected);
  CHECK(tok->decode(ids) == text);
}

namespace {

// <unk> <s> </s> [INST] <|end|> ▁ H i ▁H ▁▁ <0x20>
SpmVocab tiny_vocab() {
  SpmVocab v;
  v.pieces = {"<unk>", "<s>", "</s>", "[INST]", "<|end|>", "\xE2\x96\x81", "H", "i", "\xE2\x96\x81H",
              "\xE2\x96\x81\xE2\x96\x81", "<0x20>"};
  v.scores = {0, 0, 0, 0, 0, -1, -2, -3, -0.5f, -0.7f, 0};
  v.types = {TokenType::kUnknown, TokenType::kControl, TokenType::kControl, TokenType::kControl,
             TokenType::kControl, TokenType::kNormal, TokenType::kNormal, TokenType::kNormal, TokenType::kNormal,
             TokenType::kNormal, TokenType::kByte};
  return v;
}

}  // namespace

TEST_CASE("SentencePiece family options: dummy prefix, first-fragment prefix, rstrip") {
  using Ids = std::vector<int32_t>;
  const SpmTokenizer llama(tiny_vocab(), "tiny");  // llama.cpp / Llama 2: "▁" before every fragment
  CHECK(llama.encode("[INST] Hi", false) == Ids{3, 5, 8, 7});  // "▁▁Hi": ▁H outranks ▁▁
  CHECK(llama.decode({1, 8, 7}) == "Hi");  // the dummy prefix is dropped after BOS

  SpmVocab first = tiny_vocab();  // Mistral v3 (Metaspace "first"): not after [INST], not before " x"
  first.space_prefix_first_only = true;
  const SpmTokenizer mistral(first, "tiny");
  CHECK(mistral.encode("[INST] Hi", false) == Ids{3, 8, 7});
  CHECK(mistral.encode("Hi[INST]Hi", false) == Ids{8, 7, 3, 6, 7});
  CHECK(mistral.encode(" Hi", false) == Ids{8, 7});

  SpmVocab none = tiny_vocab();  // Gemma: no dummy prefix, so a leading space is the text's own
  none.add_space_prefix = false;
  const SpmTokenizer gemma(none, "tiny");
  CHECK(gemma.encode("Hi", false) == Ids{6, 7});
  CHECK(gemma.decode({1, 8, 7}) == " Hi");

  SpmVocab strip = tiny_vocab();  // Phi-3: <|end|> swallows the whitespace after it
  strip.strips = {{4, WhitespaceStrip{false, true}}};
  const SpmTokenizer phi3(strip, "tiny");
  CHECK(phi3.encode("<|end|>\n \tHi", false) == Ids{4, 8, 7});
  CHECK(phi3.encode("</s> Hi", false) == Ids{2, 5, 8, 7});  // only <|end|> strips here
}

TEST_CASE("special tokens: leftmost-longest matches, lstrip and rstrip over Unicode whitespace") {
  SpecialTokenMatcher m;
  m.add("<a>", 1);
  m.add("<a><b>", 2);
  m.add("<r>", 3, WhitespaceStrip{false, true});
  m.add("<l>", 4, WhitespaceStrip{true, false});
  const auto render = [&](std::string_view text) {
    std::string out;
    for (const TextFragment& f : m.split(text)) {  // appended piece by piece: GCC 12 warns falsely on "#" + string&&
      if (f.token >= 0) {
        out += '#';
        out += std::to_string(f.token);
      } else {
        out += '[';
        out += f.text;
        out += ']';
      }
    }
    return out;
  };
  CHECK(render("x<a><b>y<a>") == "[x]#2[y]#1");
  CHECK(render("x<r> \n\xC2\xA0\xE3\x80\x80y ") == "[x]#3[y ]");  // NBSP and U+3000 are White_Space
  CHECK(render("x<r>\xE2\x80\x8By") == "[x]#3[\xE2\x80\x8By]");  // zero width space is not
  CHECK(render("x \t<l> y") == "[x]#4[ y]");
  CHECK(render("<r>  <l>z") == "#3#4[z]");
  CHECK(render("  <l>") == "#4");
  // add_all: the first id of a duplicate text wins (also over texts added before), longest first.
  m.add_all({{"<a><b><c>", 5, {}}, {"<x>", 6, {}}, {"<x>", 7, {}}, {"<a>", 8, {}}, {"", 9, {}}});
  CHECK(render("<a><b><c><x><a><b>") == "#5#6#2");
}

}  // namespace cbatch
