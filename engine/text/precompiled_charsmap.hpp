// SentencePiece's compiled normalization rules (tokenizer.json normalizer "Precompiled", the base64 of
// the model's precompiled_charsmap: XLM-R's nmt_nfkc), applied as Hugging Face `tokenizers` applies them.
// The blob is a little-endian uint32 trie size, a Darts-clone double-array trie of that many bytes
// (uint32 units) whose values are offsets into the rest: NUL-terminated replacement strings. Text is cut
// into grapheme clusters; a cluster under 6 bytes that some key prefixes becomes the replacement of the
// shortest such key (the whole cluster, as `tokenizers` does), else each character is replaced when a
// key prefixes it, or kept. Clusters here (Unicode's extended grapheme clusters, simplified): a character
// followed by its marks (\p{M}), ZWJ, variation selectors, emoji modifiers and tags, and after a ZWJ a
// pictograph when the cluster began with one; a prepended concatenation mark with the character after
// it; CR LF; a control or format character (U+200B, U+FEFF, ...) alone. Hangul jamo sequences,
// regional-indicator pairs and prepended marks are not joined: such clusters are 6 bytes or more, which go
// character by character anyway.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace cbatch {

class PrecompiledCharsmap {
 public:
  // blob: the decoded bytes; throws cbatch::Error (naming `what`) when it is malformed.
  PrecompiledCharsmap(std::string_view blob, const std::string& what);

  std::string normalize(std::string_view text) const;

 private:
  // The replacement of the shortest key that is a prefix of chunk; false when none is.
  bool transform(std::string_view chunk, std::string_view* replacement) const;

  std::vector<uint32_t> units_;  // (trie bytes / 4) the double array
  std::string normalized_;       // replacement strings, each ending in NUL
};

// Standard base64 (padding optional); false on a character outside the alphabet.
bool decode_base64(std::string_view text, std::string* out);

}  // namespace cbatch
