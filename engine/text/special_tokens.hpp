// Finds the text of special and added tokens ("<|im_start|>", "<s>") in input text, so that tokenizers
// encode them as their ids and run BPE only on the text between (Hugging Face's added-token split).
// Matching is leftmost-longest: at the first position where any token's text starts, the longest
// token that matches there wins. A token may swallow the Unicode whitespace on its left or right
// (Hugging Face's added-token lstrip / rstrip): that whitespace is dropped from the text around it.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cbatch {

struct WhitespaceStrip {
  bool left = false;   // lstrip: whitespace before the token (back to the previous token) is dropped
  bool right = false;  // rstrip: whitespace after the token is dropped
};

struct TextFragment {
  std::string_view text;  // raw text (when token < 0)
  int32_t token = -1;     // a special token's id, or -1
};

class SpecialTokenMatcher {
 public:
  // Registers a token's text (empty texts are ignored; the first id of a duplicate text wins).
  void add(const std::string& text, int32_t id, WhitespaceStrip strip = {});
  // The same for many tokens at once, in O(n log n) (a vocabulary may have thousands: Gemma's 6,400).
  struct Token {
    std::string text;
    int32_t id = -1;
    WhitespaceStrip strip;
  };
  void add_all(std::vector<Token> tokens);
  bool empty() const { return num_tokens_ == 0; }

  // text as raw fragments (never empty) and special tokens, in order.
  std::vector<TextFragment> split(std::string_view text) const;

 private:
  using Entry = Token;
  const Entry* match_at(std::string_view text, size_t pos) const;  // nullptr when none

  std::array<std::vector<Entry>, 256> by_first_byte_;  // longest first
  size_t num_tokens_ = 0;
};

}  // namespace cbatch
