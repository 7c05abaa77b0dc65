// Fuzz target: arbitrary bytes as prompt text through SentencePiece tokenizers (a small built-in
// vocabulary, and tiny-spm's GGUF: 512 pieces with byte fallback, written by the ctest fixture tiny_spm),
// the byte-level BPE of SmolLM2's GGUF (models/, make test-data), a small byte-level BPE whose Split regexes
// run on PCRE2 (invalid UTF-8 included), and the byte tokenizer of dummy models;
// a file that is missing is named on stderr and left out. Properties: any bytes encode to ids inside the
// vocabulary, and decoding gives the text back exactly. The round trips are checked where they are defined:
// valid UTF-8 (what JSON prompts always are; on invalid bytes the tokenizer, like llama.cpp, sizes a
// character by its lead byte, so "\xEF " swallows part of the escaped space), without U+2581 (read as a
// space, as SentencePiece does), without the text of a special token (it becomes the control id, which
// decodes to nothing), with byte tokens for every byte (the SentencePiece vocabularies have them).
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string_view>

#include "engine/model/gguf.hpp"
#include "engine/text/bpe_tokenizer.hpp"
#include "engine/text/byte_level.hpp"
#include "engine/text/regex_split.hpp"
#include "engine/text/spm_tokenizer.hpp"
#include "engine/model/gguf_tokenizer.hpp"
#include "engine/text/tokenizer_loaders.hpp"
#include "engine/text/utf8.hpp"
#include "fuzz_support.hpp"

using namespace cbatch;

namespace {

// <unk>, <s>, </s>, the 256 byte tokens, then a few merges.
std::unique_ptr<Tokenizer> builtin_spm() {
  SpmVocab v;
  auto add = [&](std::string piece, float score, TokenType type) {
    v.pieces.push_back(std::move(piece));
    v.scores.push_back(score);
    v.types.push_back(type);
  };
  add("<unk>", 0, TokenType::kUnknown);
  add("<s>", 0, TokenType::kControl);
  add("</s>", 0, TokenType::kControl);
  for (int b = 0; b < 256; ++b) {
    char piece[8];
    std::snprintf(piece, sizeof(piece), "<0x%02X>", b);
    add(piece, 0, TokenType::kByte);
  }
  float score = -1;
  for (const char* piece : {"\xE2\x96\x81", "a", "b", "\xE2\x96\x81" "a", "ab", "ba", "\xE2\x96\x81" "ab", "aa",
                            "\xC3\xA9", "e", "\xE2\x96\x81" "e"}) {
    add(piece, score, TokenType::kNormal);
    score -= 1;
  }
  return std::make_unique<SpmTokenizer>(std::move(v), "builtin");
}

// Byte-level BPE over the 256 byte tokens and three merges, split on PCRE2: Qwen2's regex in a group (so no
// scanner takes it), then digit runs and word boundaries merged with what follows them.
std::unique_ptr<Tokenizer> builtin_regex_bpe() {
  BpeTokenizerSpec spec;
  for (int b = 0; b < 256; ++b) spec.tokens.push_back(byte_level_encode(std::string(1, static_cast<char>(b))));
  spec.tokens.insert(spec.tokens.end(), {"he", "ll", "\xC4\xA0t"});
  spec.types.assign(spec.tokens.size(), TokenType::kNormal);
  spec.merges = {{"h", "e"}, {"l", "l"}, {"\xC4\xA0", "t"}};
  const auto regex = [](std::string_view pattern, SplitBehavior behavior) {
    return SplitRule(std::make_shared<const RegexSplitter>(pattern, RegexSplitter::Syntax::kRegex, behavior, false));
  };
  spec.pre_tokenizer = PreTokenizer(
      {regex(R"((?:(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|)"
             R"(\s+(?!\S)|\s+))",
             SplitBehavior::kIsolated),
       regex(R"(\p{N}+|\b)", SplitBehavior::kMergedWithNext)});
  return std::make_unique<BpeTokenizer>(std::move(spec), "builtin-regex");
}

// The tokenizer of a GGUF file; nullptr (named on stderr) when the file is missing.
std::unique_ptr<Tokenizer> load_if_present(const std::string& path) {
  if (std::filesystem::exists(path)) return load_gguf_tokenizer(GgufFile(path));
  std::fprintf(stderr, "fuzz_tokenizer: %s is missing; its tokenizer is not fuzzed\n", path.c_str());
  return nullptr;
}

void check_round_trip(const Tokenizer& tokenizer, std::string_view text) {
  const std::vector<int32_t> ids = tokenizer.encode(text, /*add_special=*/true);
  for (int32_t id : ids) fuzz::require(id >= 0 && id < tokenizer.vocab_size(), "id in the vocabulary");
  // Special-token text ("</s>") becomes its id, as in Hugging Face, and control ids decode to nothing.
  bool has_control = false;
  for (int32_t id : tokenizer.encode(text, /*add_special=*/false)) {
    has_control = has_control || tokenizer.decode_piece(-1, id).empty();
  }
  const bool defined = !has_control && (tokenizer.kind() == "byte" || is_valid_utf8(text)) &&
                       (tokenizer.kind() != "llama" || text.find("\xE2\x96\x81") == std::string_view::npos);
  if (defined) {
    fuzz::require(tokenizer.decode(ids) == text, "decode(encode(text)) == text", std::string(tokenizer.kind()));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::unique_ptr<Tokenizer> spm = builtin_spm();
  static const std::unique_ptr<Tokenizer> tiny_spm = load_if_present(CBATCH_TINY_SPM_DIR "/tiny-spm.gguf");
  static const std::unique_ptr<Tokenizer> smollm2 =
      load_if_present(CBATCH_SOURCE_DIR "/models/SmolLM2-135M-Instruct.Q4_1.gguf");
  static const std::unique_ptr<Tokenizer> regex_bpe = builtin_regex_bpe();
  static const std::unique_ptr<Tokenizer> bytes = make_byte_tokenizer(512, -1, {});
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  check_round_trip(*spm, text);
  if (tiny_spm) check_round_trip(*tiny_spm, text);
  if (smollm2) check_round_trip(*smollm2, text);
  check_round_trip(*regex_bpe, text);
  check_round_trip(*bytes, text);
  return 0;
}
