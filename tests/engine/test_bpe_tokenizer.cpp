// Byte-level BPE: SmolLM2's vocabulary (its GGUF under models/) against Hugging Face ids, a hand-built
// byte-level vocabulary against hand-derived ids, llama.cpp's ggml-vocab-gpt-2 suite with the optional
// shared data, the pre-tokenizer scanners on hand-checked splits (each regex alternative, lookahead,
// digits, newlines, non-ASCII classes), the byte-level alphabet, special-token text, and clear errors for
// unknown pre-tokenizer names.
#include <doctest/doctest.h>

#include "engine/text/bpe_tokenizer.hpp"
#include "engine/text/byte_level.hpp"
#include "engine/model/model.hpp"
#include "engine/text/pretokenizer.hpp"
#include "engine/text/unicode.hpp"
#include "test_files.hpp"

namespace cbatch {
namespace {

using test::have_files;
using test::shared_path;
using test::source_path;

std::vector<std::string> split(const std::vector<SplitRule>& rules, std::string_view text) {
  std::vector<std::string> out;
  for (std::string_view piece : PreTokenizer(rules).split(text)) out.emplace_back(piece);
  return out;
}

using Pieces = std::vector<std::string>;

}  // namespace

TEST_CASE("unicode classes come from the generated table") {
  CHECK(unicode::is_letter('a'));
  CHECK(unicode::is_letter(0x00E9));   // é
  CHECK(unicode::is_letter(0x4E2D));   // 中
  CHECK(unicode::is_number('7'));
  CHECK(unicode::is_number(0x00B2));   // ² (No)
  CHECK(unicode::is_number(0x0663));   // Arabic-Indic three (Nd)
  CHECK(unicode::is_whitespace(0x3000));
  CHECK(unicode::is_whitespace(0x85));
  CHECK_FALSE(unicode::is_whitespace(0x1C));  // Python's isspace() says yes, \s does not
  CHECK_FALSE(unicode::is_letter(0x1F600));   // emoji: other
  CHECK(unicode::flags(unicode::kInvalid) == 0);
  CHECK((unicode::flags(0x3002) & unicode::kPunctuation) != 0);  // 。
}

TEST_CASE("GPT-2 split rule") {
  const std::vector<SplitRule> gpt2 = {SplitPattern::kGpt2};
  CHECK(split(gpt2, "Hello world") == Pieces{"Hello", " world"});
  CHECK(split(gpt2, "I'm can't they're") == Pieces{"I", "'m", " can", "'t", " they", "'re"});
  CHECK(split(gpt2, "I'M") == Pieces{"I", "'", "M"});  // case-sensitive contractions
  CHECK(split(gpt2, "a  b") == Pieces{"a", " ", " b"});  // \s+(?!\S) leaves one space to the word
  CHECK(split(gpt2, "a   ") == Pieces{"a", "   "});      // trailing run stays whole
  CHECK(split(gpt2, "x\n\ny") == Pieces{"x", "\n", "\n", "y"});  // the run leaves its last character
  CHECK(split(gpt2, "x \n y") == Pieces{"x", " \n", " y"});
  CHECK(split(gpt2, "abc123 456!!?") == Pieces{"abc", "123", " 456", "!!?"});
  CHECK(split(gpt2, " !x") == Pieces{" !", "x"});
  CHECK(split(gpt2, "héllo 世界") == Pieces{"héllo", " 世界"});
  CHECK(split(gpt2, "").empty());
}

TEST_CASE("StarCoder/SmolLM split: digits one by one, then GPT-2") {
  const auto rules = split_rules_for_pre("smollm");
  REQUIRE(rules);
  CHECK(split(*rules, "a 1234b") == Pieces{"a", " ", "1", "2", "3", "4", "b"});
  CHECK(split(*rules, "x²") == Pieces{"x", "²"});
}

TEST_CASE("Llama 3 and Qwen2 split rules") {
  const std::vector<SplitRule> llama3 = {SplitPattern::kLlama3};
  CHECK(split(llama3, "I'M fine") == Pieces{"I", "'M", " fine"});  // case-insensitive
  CHECK(split(llama3, "12345 abc") == Pieces{"123", "45", " abc"});
  CHECK(split(llama3, ".Hello") == Pieces{".Hello"});                  // [^\r\n\p{L}\p{N}]?\p{L}+
  CHECK(split(llama3, "\tword") == Pieces{"\tword"});
  CHECK(split(llama3, "a\nb") == Pieces{"a", "\n", "b"});
  CHECK(split(llama3, "x !!\n\ny") == Pieces{"x", " !!\n\n", "y"});   // ' ?[^\s\p{L}\p{N}]+[\r\n]*'
  CHECK(split(llama3, "x  \n  \n y") == Pieces{"x", "  \n  \n", " y"});  // \s*[\r\n]+
  CHECK(split(llama3, "a   b") == Pieces{"a", "  ", " b"});
  CHECK(split({SplitPattern::kQwen2}, "x 2024") == Pieces{"x", " ", "2", "0", "2", "4"});
}

TEST_CASE("llama.cpp default BPE split isolates punctuation runs and digit triples") {
  const auto rules = split_rules_for_pre("default");
  REQUIRE(rules);
  CHECK(split(*rules, "a+=b 12345") == Pieces{"a", "+=", "b", " ", "123", "45"});
}

TEST_CASE("pre-tokenizer names and regexes") {
  for (const char* name : {"gpt-2", "mpt", "olmo", "smollm", "starcoder", "refact", "llama-bpe", "qwen2", "default"}) {
    CHECK_MESSAGE(split_rules_for_pre(name).has_value(), name);
  }
  CHECK_FALSE(split_rules_for_pre("my-own-pre"));
  CHECK(split_pattern_for_regex(R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)") ==
        SplitPattern::kGpt2);
  CHECK_FALSE(split_pattern_for_regex(R"(\w+)"));
}

TEST_CASE("byte-level alphabet round trip") {
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  const std::string encoded = byte_level_encode(all);
  CHECK(byte_level_encode(" ") == "\xC4\xA0");  // Ġ
  CHECK(byte_level_encode("\n") == "\xC4\x8A");  // Ċ
  CHECK(byte_level_encode("a") == "a");
  std::string back;
  REQUIRE(byte_level_decode(encoded, &back));
  CHECK(back == all);
  CHECK_FALSE(byte_level_decode("\xE4\xB8\xAD", &back));  // 中 is not in the alphabet
}

TEST_CASE("byte-level BPE: GPT-2 splits, merges by rank, byte alphabet, control text (hand-derived ids)") {
  BpeTokenizerSpec spec;  // ids 0..255: the byte-level character of that byte; then merges and a control
  for (int b = 0; b < 256; ++b) spec.tokens.push_back(byte_level_encode(std::string(1, static_cast<char>(b))));
  spec.tokens.insert(spec.tokens.end(), {"ll", "\xC4\xA0w", "or", "\xC4\xA0wor", "he", "hell", "<|endoftext|>"});
  spec.types.assign(spec.tokens.size(), TokenType::kNormal);
  spec.types.back() = TokenType::kControl;
  spec.merges = {{"l", "l"}, {"\xC4\xA0", "w"}, {"o", "r"}, {"\xC4\xA0w", "or"}, {"h", "e"}, {"he", "ll"}};
  spec.pre_tokenizer = PreTokenizer({SplitPattern::kGpt2});
  spec.eos_ids = {262};
  const BpeTokenizer tok(spec, "test");
  using Ids = std::vector<int32_t>;
  // "hello" -> h e ll o -> he ll o -> hell o; " world" -> Ġw o r l d -> Ġw or l d -> Ġwor l d.
  CHECK(tok.encode("hello world", true) == Ids{261, 'o', 259, 'l', 'd'});
  CHECK(tok.encode("hello<|endoftext|>\xC3\xA9", true) == Ids{261, 'o', 262, 0xC3, 0xA9});
  CHECK(tok.encode("world", false) == Ids{'w', 258, 'l', 'd'});  // no space: no "Ġw" merge
  CHECK(tok.encode(" \n", false) == Ids{' ', '\n'});              // "Ġ" is byte 0x20's character, id 32
  CHECK(tok.decode({261, 'o', 259, 262, 0xC3, 0xA9}) == "hello wor\xC3\xA9");
}

TEST_CASE("byte-level BPE agrees with Hugging Face on SmolLM2's vocabulary") {
  const std::string gguf = source_path("models/SmolLM2-135M-Instruct.Q4_1.gguf");
  if (!have_files({gguf})) return;  // a fetched model (make test-data)
  const auto tokenizer = load_tokenizer(ModelSource{gguf, "", 0});
  CHECK(tokenizer->kind() == "gpt2");
  CHECK(tokenizer->vocab_size() == 49152);
  // Ids from Hugging Face `tokenizers` built from the GGUF's vocabulary, merges and the SmolLM2
  // pre-tokenizer (Digits + ByteLevel), special-token text included; no BOS is added.
  const std::vector<std::pair<std::string, std::vector<int32_t>>> cases = {
      {"Hello world", {19556, 905}},
      {" Hello, y'all! How are you \xF0\x9F\x98\x81 ?\xE6\x88\x91\xE6\x83\xB3\xE5\x9C\xA8" "apple\xE5\xB7\xA5"
       "\xE4\xBD\x9C" "1314151\xE5\xA4\xA9\xEF\xBD\x9E",
       {38699, 28, 329, 23, 449, 17, 1073, 359, 346, 40303, 219, 9148, 19805, 235, 177, 221, 128, 32632,
        21949, 36149, 115, 40994, 33, 35, 33, 36, 33, 37, 33, 18614, 119, 186, 138, 248}},
      {"3333 33333 3.3", {35, 35, 35, 35, 216, 35, 35, 35, 35, 35, 216, 35, 30, 35}},
      {"    Hello\n    Hello", {333, 38699, 472, 38699}},
      {"F\xC3\xBChrer ied 4 \xC2\xBD months", {54, 46991, 16863, 216, 885, 216, 36, 216, 16738, 2704}},
      {"\xD0\xBD\xD0\xB5\xD1\x89\xD0\xBE \xD0\xBD\xD0\xB0 \xD0\x91\xD1\x8A\xD0\xBB\xD0\xB3\xD0\xB0"
       "\xD1\x80\xD1\x81\xD0\xBA\xD0\xB8",
       {8831, 6643, 46438, 6485, 40610, 5470, 235, 156, 228, 12681, 29441, 6511, 9175, 39511, 7872}},
      {"<|im_start|>user\nHi<|im_end|>", {1, 4093, 198, 26843, 2}},
      {"\n\n\n \t\t  x", {1116, 3805, 1656, 216, 1792}},
  };
  for (const auto& test_case : cases) {
    const std::string& text = test_case.first;  // not a structured binding: clang 14 cannot capture one in INFO
    const std::vector<int32_t>& ids = test_case.second;
    INFO("text=[" << text << "]");
    CHECK(tokenizer->encode(text, true) == ids);
    if (text.find("<|") == std::string::npos) CHECK(tokenizer->decode(ids) == text);  // lossless
  }
  CHECK(tokenizer->decode({19556, 2, 905}) == "Hello world");  // control ids decode to nothing
}

TEST_CASE("byte-level BPE reproduces llama.cpp's ggml-vocab-gpt-2 suite (optional shared data)") {
  const std::string vocab = shared_path("tokenizers/ggml-vocab-gpt-2.gguf");
  if (!have_files({vocab, vocab + ".inp", vocab + ".out"})) return;
  const auto tokenizer = load_tokenizer(ModelSource{vocab, "", 0});
  CHECK(tokenizer->kind() == "gpt2");
  CHECK(tokenizer->vocab_size() == 50257);
  const test::VocabSuite suite = test::read_vocab_suite(vocab);
  for (size_t i = 0; i < suite.texts.size(); ++i) {
    INFO("case " << i << ": [" << suite.texts[i] << "]");
    CHECK(tokenizer->encode(suite.texts[i], false) == suite.ids[i]);
    CHECK(tokenizer->decode(suite.ids[i]) == suite.texts[i]);  // byte-level decoding is lossless
  }
  // <|endoftext|> (control) is parsed from its text and decodes to nothing; no BOS is added.
  CHECK(tokenizer->encode("Hi<|endoftext|>", true) == std::vector<int32_t>{17250, 50256});
  CHECK(tokenizer->decode({17250, 50256}) == "Hi");
  CHECK(tokenizer->is_eos(50256));
}

TEST_CASE("BPE merges go by rank, not by position") {
  BpeTokenizerSpec spec;
  spec.tokens = {"a", "b", "c", "ab", "bc", "abc"};
  spec.types.assign(spec.tokens.size(), TokenType::kNormal);
  spec.merges = {{"b", "c"}, {"a", "b"}, {"a", "bc"}};
  const BpeTokenizer tok(spec, "test");
  CHECK(tok.encode("abc", false) == std::vector<int32_t>{5});     // b+c first, then a+bc
  CHECK(tok.encode("abab", false) == std::vector<int32_t>{3, 3});
  CHECK(tok.encode("cab", false) == std::vector<int32_t>{2, 3});
}

TEST_CASE("SentencePiece-style BPE: space prefix, byte fallback, BOS space rule") {
  BpeTokenizerSpec spec;
  spec.tokens = {"<unk>", "<0xE4>", "<0xB8>", "<0xAD>", "\xE2\x96\x81", "a", "\xE2\x96\x81" "a", "<s>"};
  spec.types = {TokenType::kUnknown, TokenType::kByte, TokenType::kByte, TokenType::kByte,
                TokenType::kNormal,  TokenType::kNormal, TokenType::kNormal, TokenType::kControl};
  spec.merges = {{"\xE2\x96\x81", "a"}};
  spec.is_byte_level = false;
  spec.space_prefix = SpacePrefix::kAlways;
  spec.model.byte_fallback = true;
  spec.model.unk_id = 0;
  spec.bos_id = 7;
  spec.add_bos = true;
  const BpeTokenizer tok(spec, "test");
  CHECK(tok.kind() == "llama");
  CHECK(tok.encode("a \xE4\xB8\xAD", true) == std::vector<int32_t>{7, 6, 4, 1, 2, 3});
  CHECK(tok.encode("a<s>a", false) == std::vector<int32_t>{6, 7, 6});  // prefix again after a special
  CHECK(tok.decode({6, 4, 1, 2, 3}, 7) == "a \xE4\xB8\xAD");         // BOS eats the first space
  CHECK(tok.decode({6}) == " a");
  CHECK(tok.decode_piece(7, 1) == "\xE4");
}

}  // namespace cbatch
