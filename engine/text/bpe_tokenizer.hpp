// BPE tokenizers with merge ranks, as Hugging Face's BPE model runs them: byte-level (GPT-2, Llama 3,
// Qwen2, SmolLM2: bytes mapped to printable characters, pre-tokenizer split rules, kind "gpt2") and
// SentencePiece-style from tokenizer.json (spaces as U+2581, a "▁" prefix, byte fallback, kind
// "llama"). Special and added tokens in the text become their ids first; BPE runs on the text between.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/text/bpe_model.hpp"
#include "engine/text/metaspace.hpp"
#include "engine/text/pretokenizer.hpp"
#include "engine/text/special_tokens.hpp"
#include "engine/text/tokenizer.hpp"

namespace cbatch {

struct BpeTokenizerSpec {
  std::vector<std::string> tokens;   // (vocab) token texts as stored ("Ġthe", "▁the", "<|im_end|>")
  std::vector<TokenType> types;      // (vocab)
  std::vector<std::pair<std::string, std::string>> merges;  // rank order
  bool is_byte_level = true;         // else SentencePiece-style
  PreTokenizer pre_tokenizer;        // byte-level: splits of each fragment before BPE
  bool add_prefix_space = false;     // byte-level: a space before a fragment that has none (RoBERTa)
  SpacePrefix space_prefix = SpacePrefix::kNone;  // SentencePiece-style
  bool split_on_space_marker = false;             // SentencePiece-style: words start at each "▁"
  bool prefix_unless_space = false;  // Metaspace: no "▁" prefix before a fragment starting with a space
  bool nfc = false;                  // NFC normalizer: text between special tokens is normalized first
  std::vector<std::pair<int32_t, WhitespaceStrip>> strips;  // added tokens' lstrip / rstrip
  BpeModelOptions model;
  int32_t bos_id = -1;
  std::vector<int32_t> eos_ids;      // end of text and end of turn
  bool add_bos = false;
  bool add_eos = false;
};

class BpeTokenizer final : public Tokenizer {
 public:
  // Throws cbatch::Error naming `source` when the spec is inconsistent.
  BpeTokenizer(BpeTokenizerSpec spec, const std::string& source);

  std::vector<int32_t> encode(std::string_view text, bool add_special) const override;
  std::string decode_piece(int32_t prev, int32_t id) const override;
  int vocab_size() const override { return static_cast<int>(decoded_.size()); }
  std::string token_text(int32_t id) const override {
    return id >= 0 && id < vocab_size() ? tokens_[id] : std::string();
  }
  std::string_view kind() const override { return is_byte_level_ ? "gpt2" : "llama"; }

 private:
  void encode_fragment(std::string_view text, bool is_first, std::vector<int32_t>& out) const;
  std::string decode_token(const std::string& text, TokenType type) const;

  bool is_byte_level_;
  PreTokenizer pre_tokenizer_;
  bool add_prefix_space_;
  SpacePrefix space_prefix_;
  bool split_on_space_marker_;
  bool prefix_unless_space_;
  bool nfc_;
  bool add_bos_;
  bool add_eos_;
  BpeModel model_;
  SpecialTokenMatcher specials_;      // control, user-defined and unknown tokens
  std::vector<std::string> tokens_;   // (vocab) token texts as stored
  std::vector<std::string> decoded_;  // (vocab) the bytes each token decodes to
  std::vector<bool> keeps_space_;     // (vocab) byte tokens keep a leading space after BOS
};

}  // namespace cbatch
