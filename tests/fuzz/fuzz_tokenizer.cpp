// Fuzz target: arbitrary bytes as prompt text through the SentencePiece tokenizer of the shared
// llama-spm vocabulary (32000 pieces; a small built-in vocabulary when the shared data is absent), the
// byte-level BPE of the shared GPT-2 vocabulary (when present), and the byte tokenizer of dummy models.
// Properties: any bytes encode to ids inside the vocabulary, and decoding gives the text back exactly. The BPE round trips are checked where they are defined:
// valid UTF-8 (what JSON prompts always are; on invalid bytes the tokenizer, like llama.cpp, sizes a
// character by its lead byte, so "\xEF " swallows part of the escaped space), without U+2581 (read as a
// space, as SentencePiece does), without the text of a special token (it becomes the control id, which
// decodes to nothing), with byte tokens for every byte (both vocabularies have them).
#include <filesystem>
#include <memory>
#include <string_view>

#include "engine/model/gguf.hpp"
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

std::unique_ptr<Tokenizer> load_spm() {
  const std::string path = std::string(CBATCH_SHARED_DIR) + "/tokenizers/ggml-vocab-llama-spm.gguf";
  if (!std::filesystem::exists(path)) return builtin_spm();
  return load_gguf_tokenizer(GgufFile(path));
}

// The GPT-2 byte-level BPE vocabulary of the shared suite; nullptr when the shared data is absent.
std::unique_ptr<Tokenizer> load_gpt2() {
  const std::string path = std::string(CBATCH_SHARED_DIR) + "/tokenizers/ggml-vocab-gpt-2.gguf";
  if (!std::filesystem::exists(path)) return nullptr;
  return load_gguf_tokenizer(GgufFile(path));
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
  static const std::unique_ptr<Tokenizer> spm = load_spm();
  static const std::unique_ptr<Tokenizer> bytes = make_byte_tokenizer(512, -1, {});
  static const std::unique_ptr<Tokenizer> gpt2 = load_gpt2();
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  check_round_trip(*spm, text);
  if (gpt2) check_round_trip(*gpt2, text);
  check_round_trip(*bytes, text);
  return 0;
}
