// SentencePiece Unigram tokenizers from tokenizer.json (XLM-RoBERTa: bge-m3, multilingual-e5 and their
// rerankers; kind "unigram"), run as Hugging Face `tokenizers` runs them: added tokens in the text become
// their ids first; each fragment between them goes through the normalizers in order, the pre-tokenizer
// (optional WhitespaceSplit, then Metaspace: spaces to "▁", a "▁" prefix by prepend_scheme, words
// starting at each "▁") and the Unigram model (unigram_model.hpp). With add_special the post-processor's
// tokens go around the text (<s> ... </s>); a pair follows its pair template (<s> a </s></s> b </s>).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/text/metaspace.hpp"
#include "engine/text/pair_template.hpp"
#include "engine/text/precompiled_charsmap.hpp"
#include "engine/text/special_tokens.hpp"
#include "engine/text/tokenizer.hpp"
#include "engine/text/unigram_model.hpp"

namespace cbatch {

// One normalizer of a Sequence, applied in order to each fragment of text between added tokens.
struct TextNormalizer {
  enum class Kind : uint8_t {
    kNfc,
    kStrip,          // Unicode whitespace off the left and/or right end
    kReplace,        // every `from` by `to`
    kCollapseSpaces, // Replace of the regex " {2,}": each run of two or more spaces by `to`
    kPrecompiled,    // SentencePiece's compiled normalization rules (precompiled_charsmap.hpp)
  };
  Kind kind = Kind::kNfc;
  bool left = false, right = false;  // kStrip
  std::string from, to;              // kReplace; kCollapseSpaces uses `to`
  std::shared_ptr<const PrecompiledCharsmap> charsmap;  // kPrecompiled
};

struct UnigramTokenizerSpec {
  UnigramModelSpec model;
  std::vector<std::string> tokens;   // (vocab) the model's pieces, then added tokens past them
  std::vector<TokenType> types;      // (vocab) model pieces kNormal, added tokens kControl / kUserDefined
  std::vector<std::pair<int32_t, WhitespaceStrip>> strips;  // added tokens' lstrip / rstrip
  std::vector<TextNormalizer> normalizers;
  bool whitespace_split = false;     // a WhitespaceSplit pre-tokenizer before Metaspace
  bool metaspace = false;            // else the model sees each normalized fragment whole
  SpacePrefix space_prefix = SpacePrefix::kAlways;  // Metaspace prepend_scheme
  bool split_on_space_marker = true;                // Metaspace split
  PostProcessorSpec post;
};

class UnigramTokenizer final : public Tokenizer {
 public:
  explicit UnigramTokenizer(UnigramTokenizerSpec spec);

  std::vector<int32_t> encode(std::string_view text, bool add_special) const override;
  EncodedPair encode_pair(std::string_view a, std::string_view b) const override;
  std::string decode_piece(int32_t prev, int32_t id) const override;
  int vocab_size() const override { return static_cast<int>(pieces_.size()); }
  std::string token_text(int32_t id) const override {
    return id >= 0 && id < vocab_size() ? pieces_[id] : std::string();
  }
  std::string_view kind() const override { return "unigram"; }

 private:
  std::string normalize(std::string_view text) const;
  void encode_word(std::string_view word, bool is_first, std::vector<int32_t>& out) const;

  std::vector<std::string> pieces_;  // (vocab) token texts
  std::vector<TokenType> types_;     // (vocab)
  std::vector<TextNormalizer> normalizers_;
  bool whitespace_split_;
  bool metaspace_;
  SpacePrefix space_prefix_;
  bool split_on_space_marker_;
  PostProcessorSpec post_;
  UnigramModel model_;
  SpecialTokenMatcher specials_;
};

// True when tokenizer.json's model is Unigram.
bool is_unigram_json(const std::string& path);
// Throws cbatch::Error naming the file and the field for unsupported components.
std::unique_ptr<Tokenizer> load_unigram_tokenizer(const std::string& path);

}  // namespace cbatch
