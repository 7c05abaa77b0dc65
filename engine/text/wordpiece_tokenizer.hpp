// WordPiece tokenizers from tokenizer.json (BERT and its descendants, kind "bert"): added tokens in the
// text become their ids first; the text between runs BertNormalizer, BertPreTokenizer and greedy
// longest-match-first WordPiece ("##" continuations; a word with no full match, or longer than
// max_input_chars_per_word characters, is one [UNK]); with add_special the post-processor's tokens
// go first and last ([CLS] ... [SEP]); a pair follows the pair template ([CLS] a [SEP] b [SEP], token
// type 0 up to the first [SEP], 1 after it).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/text/bert_text.hpp"
#include "engine/text/pair_template.hpp"
#include "engine/text/special_tokens.hpp"
#include "engine/text/tokenizer.hpp"

namespace cbatch {

struct WordPieceSpec {
  std::vector<std::string> tokens;  // (vocab) token texts ("the", "##ing", "[CLS]")
  std::vector<TokenType> types;     // (vocab)
  int32_t unk_id = -1;
  std::string continuing_prefix = "##";
  int max_input_chars_per_word = 100;
  bert::NormalizerOptions normalizer;
  bool has_normalizer = false;
  std::vector<int32_t> prefix_ids;  // post-processor: before the text ([CLS])
  std::vector<int32_t> suffix_ids;  // ... and after it ([SEP])
  std::vector<PairTemplateItem> pair_template = {{-1, 0, 0}, {-1, 1, 1}};  // A then B without a post-processor
};

class WordPieceTokenizer final : public Tokenizer {
 public:
  explicit WordPieceTokenizer(WordPieceSpec spec);

  std::vector<int32_t> encode(std::string_view text, bool add_special) const override;
  EncodedPair encode_pair(std::string_view a, std::string_view b) const override;
  std::string decode_piece(int32_t prev, int32_t id) const override;
  int vocab_size() const override { return static_cast<int>(spec_.tokens.size()); }
  std::string token_text(int32_t id) const override {
    return id >= 0 && id < vocab_size() ? spec_.tokens[id] : std::string();
  }
  std::string_view kind() const override { return "bert"; }
  // The number of tokens add_special adds around the text.
  int num_special_added() const { return static_cast<int>(spec_.prefix_ids.size() + spec_.suffix_ids.size()); }

 private:
  void encode_word(const std::string& word, std::vector<int32_t>& out) const;

  WordPieceSpec spec_;
  std::unordered_map<std::string, int32_t> ids_;  // token text -> id
  SpecialTokenMatcher specials_;
};

// True when tokenizer.json's model is WordPiece.
bool is_wordpiece_json(const std::string& path);
// Throws cbatch::Error naming the file and the field for unsupported components.
std::unique_ptr<Tokenizer> load_wordpiece_tokenizer(const std::string& path);

}  // namespace cbatch
