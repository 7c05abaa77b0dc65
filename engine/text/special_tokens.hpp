// Finds the text of special and added tokens ("<|im_start|>", "<s>") in input text, so that tokenizers
// encode them as their ids and run BPE only on the text between (Hugging Face's added-token split).
// Matching is leftmost-longest: at the first position where any token's text starts, the longest
// token that matches there wins.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cbatch {

struct TextFragment {
  std::string_view text;  // raw text (when token < 0)
  int32_t token = -1;     // a special token's id, or -1
};

class SpecialTokenMatcher {
 public:
  // Registers a token's text (empty texts are ignored; the first id of a duplicate text wins).
  void add(const std::string& text, int32_t id);
  bool empty() const { return num_tokens_ == 0; }

  // text as raw fragments (never empty) and special tokens, in order.
  std::vector<TextFragment> split(std::string_view text) const;

 private:
  size_t match_at(std::string_view text, size_t pos, int32_t* id) const;  // length, 0 when none

  std::array<std::vector<std::pair<std::string, int32_t>>, 256> by_first_byte_;  // longest first
  size_t num_tokens_ = 0;
};

}  // namespace cbatch
