// SentencePiece-style BPE with byte fallback (tokenizer kind "llama"), as SentencePiece, Hugging Face
// and llama.cpp encode: spaces become U+2581 "▁", a dummy "▁" prefixes non-empty text, adjacent pieces
// merge highest score first (ties: leftmost) via a priority queue (O(n log n)), and characters with
// no piece fall back to their UTF-8 bytes as <0xNN> tokens. The text of control, user-defined and
// unknown tokens ("<s>") becomes their id; the text between gets the dummy prefix again (llama.cpp,
// Hugging Face). Built from GGUF metadata or a llama2.c tokenizer.bin (see model/gguf_tokenizer.hpp,
// tokenizer_loaders.hpp).
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/text/special_tokens.hpp"
#include "engine/text/tokenizer.hpp"

namespace cbatch {

struct SpmVocab {
  std::vector<std::string> pieces;  // (vocab) piece text, spaces written as U+2581
  std::vector<float> scores;        // (vocab) merge priority, higher merges first
  std::vector<TokenType> types;     // (vocab)
  int32_t unk_id = 0;
  int32_t bos_id = 1;
  int32_t eos_id = 2;
  std::vector<int32_t> extra_eos_ids;  // end-of-turn tokens that also stop generation
  bool add_bos = true;                 // encode(text, add_special=true) prepends BOS
  bool add_eos = false;                // ... and appends EOS
  bool add_space_prefix = true;        // the dummy "▁" before non-empty text (decoding drops it again)
  // The dummy prefix only before the text's first fragment, and not when it starts with a space
  // (Hugging Face's Metaspace prepend_scheme "first", Mistral's v3 tokenizer); else before every fragment
  // between special tokens, as llama.cpp and Llama 2's tokenizer.json do.
  bool space_prefix_first_only = false;
  std::vector<std::pair<int32_t, WhitespaceStrip>> strips;  // special tokens that swallow whitespace (Phi-3)
};

class SpmTokenizer final : public Tokenizer {
 public:
  // Throws cbatch::Error when the vocabulary is inconsistent (`source` names the file in messages).
  SpmTokenizer(SpmVocab vocab, const std::string& source);

  std::vector<int32_t> encode(std::string_view text, bool add_special) const override;
  std::string decode_piece(int32_t prev, int32_t id) const override;
  int vocab_size() const override { return static_cast<int>(vocab_.pieces.size()); }
  std::string token_text(int32_t id) const override {
    return id >= 0 && id < vocab_size() ? vocab_.pieces[id] : std::string();
  }
  std::string_view kind() const override { return "llama"; }

 private:
  int32_t find_piece(std::string_view piece) const;  // a mergeable piece's id, -1 if none
  void append_bytes(std::string_view text, std::vector<int32_t>& out) const;
  void encode_text(const std::string& escaped, std::vector<int32_t>& out) const;

  SpmVocab vocab_;
  std::unordered_map<std::string, int32_t> piece_ids_;  // normal, user-defined and unused pieces
  std::array<int32_t, 256> byte_ids_{};                 // byte -> its <0xNN> token (unk if none)
  std::vector<std::string> decoded_;                    // (vocab) the bytes each token decodes to
  SpecialTokenMatcher specials_;                        // control, user-defined and unknown tokens
};

// Whether `piece` is a byte token's text "<0xNN>"; stores NN in *byte.
bool parse_byte_piece(std::string_view piece, uint8_t* byte);

}  // namespace cbatch
