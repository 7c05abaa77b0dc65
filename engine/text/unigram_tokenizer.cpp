// Unigram encoding and decoding; see unigram_tokenizer.hpp. Decoding follows the Metaspace decoder: "▁"
// is a space and the first piece's leading space (after <s>) is dropped; <0xXX> pieces give their byte;
// control and unknown tokens give "".
#include "engine/text/unigram_tokenizer.hpp"

#include <algorithm>

#include "engine/base/error.hpp"
#include "engine/text/nfc.hpp"
#include "engine/text/spm_tokenizer.hpp"
#include "engine/text/unicode.hpp"

namespace cbatch {
namespace {

std::string collapse_spaces(std::string_view text, std::string_view to) {
  std::string out;
  for (size_t i = 0; i < text.size();) {
    if (text[i] != ' ') {
      out.push_back(text[i++]);
      continue;
    }
    const size_t end = std::min(text.find_first_not_of(' ', i), text.size());
    out.append(end - i >= 2 ? to : std::string_view(" "));
    i = end;
  }
  return out;
}

// text without the Unicode White_Space characters at its left and/or right end.
std::string strip(std::string_view text, bool left, bool right) {
  const unicode::Codepoints cps = unicode::decode_utf8(text);
  size_t begin = 0, end = cps.cps.size();
  while (left && begin < end && unicode::is_whitespace(cps.cps[begin])) ++begin;
  while (right && end > begin && unicode::is_whitespace(cps.cps[end - 1])) --end;
  return std::string(text.substr(cps.offsets[begin], cps.offsets[end] - cps.offsets[begin]));
}

// The words of a WhitespaceSplit pre-tokenizer (runs of non-White_Space), each with its byte offset.
std::vector<std::pair<std::string_view, size_t>> split_whitespace(std::string_view text) {
  std::vector<std::pair<std::string_view, size_t>> words;
  const unicode::Codepoints cps = unicode::decode_utf8(text);
  for (size_t i = 0; i < cps.cps.size();) {
    while (i < cps.cps.size() && unicode::is_whitespace(cps.cps[i])) ++i;
    const size_t begin = i;
    while (i < cps.cps.size() && !unicode::is_whitespace(cps.cps[i])) ++i;
    if (i > begin) words.emplace_back(text.substr(cps.offsets[begin], cps.offsets[i] - cps.offsets[begin]), cps.offsets[begin]);
  }
  return words;
}

}  // namespace

UnigramTokenizer::UnigramTokenizer(UnigramTokenizerSpec spec)
    : pieces_(std::move(spec.tokens)),
      types_(std::move(spec.types)),
      normalizers_(std::move(spec.normalizers)),
      whitespace_split_(spec.whitespace_split),
      metaspace_(spec.metaspace),
      space_prefix_(spec.space_prefix),
      split_on_space_marker_(spec.split_on_space_marker),
      post_(std::move(spec.post)),
      model_(std::move(spec.model)) {
  std::vector<SpecialTokenMatcher::Token> specials;
  for (size_t id = 0; id < pieces_.size(); ++id) {
    if (types_[id] != TokenType::kControl && types_[id] != TokenType::kUserDefined) continue;
    WhitespaceStrip around;
    for (const auto& [token, s] : spec.strips) around = token == static_cast<int32_t>(id) ? s : around;
    specials.push_back({pieces_[id], static_cast<int32_t>(id), around});
  }
  specials_.add_all(std::move(specials));
  bos_id_ = post_.prefix_ids.empty() ? -1 : post_.prefix_ids.front();
  if (!post_.suffix_ids.empty()) eos_ids_.push_back(post_.suffix_ids.back());
}

std::string UnigramTokenizer::normalize(std::string_view text) const {
  std::string s(text);
  for (const TextNormalizer& n : normalizers_) {
    switch (n.kind) {
      case TextNormalizer::Kind::kNfc: s = unicode::to_nfc(s); break;
      case TextNormalizer::Kind::kStrip: s = strip(s, n.left, n.right); break;
      case TextNormalizer::Kind::kReplace: s = replace_all(s, n.from, n.to); break;
      case TextNormalizer::Kind::kCollapseSpaces: s = collapse_spaces(s, n.to); break;
      case TextNormalizer::Kind::kPrecompiled: s = n.charsmap->normalize(s); break;
    }
  }
  return s;
}

// One pre-tokenized word through Metaspace (when the tokenizer has it) and the model.
void UnigramTokenizer::encode_word(std::string_view word, bool is_first, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (!metaspace_) {
    model_.encode_word(word, out);
    return;
  }
  std::string escaped = replace_all(word, " ", kSpaceMarker);
  const bool prefix = (space_prefix_ == SpacePrefix::kAlways || (space_prefix_ == SpacePrefix::kFirst && is_first)) &&
                      escaped.compare(0, kSpaceMarker.size(), kSpaceMarker) != 0;
  if (prefix) escaped.insert(0, kSpaceMarker);
  for_each_metaspace_word(escaped, split_on_space_marker_, [&](std::string_view piece) { model_.encode_word(piece, out); });
}

std::vector<int32_t> UnigramTokenizer::encode(std::string_view text, bool add_special) const {
  std::vector<int32_t> out;
  if (add_special) out = post_.prefix_ids;
  for (const TextFragment& fragment : specials_.split(text)) {
    if (fragment.token >= 0) {
      out.push_back(fragment.token);
      continue;
    }
    const bool at_start = fragment.text.data() == text.data();
    const std::string normalized = normalize(fragment.text);
    if (!whitespace_split_) {
      encode_word(normalized, at_start, out);
      continue;
    }
    for (const auto& [word, offset] : split_whitespace(normalized)) encode_word(word, at_start && offset == 0, out);
  }
  if (add_special) out.insert(out.end(), post_.suffix_ids.begin(), post_.suffix_ids.end());
  return out;
}

EncodedPair UnigramTokenizer::encode_pair(std::string_view a, std::string_view b) const {
  return join_pair(post_.pair_template, [&](int sequence) { return encode(sequence == 0 ? a : b, false); });
}

std::string UnigramTokenizer::decode_piece(int32_t prev, int32_t id) const {
  if (id < 0 || id >= vocab_size()) {
    throw Error("token id " + std::to_string(id) + " is outside the vocabulary (0.." + std::to_string(vocab_size() - 1) + ")");
  }
  const TokenType type = types_[id];
  if (type == TokenType::kControl || type == TokenType::kUnused || id == bos_id_) return "";
  if (type == TokenType::kUserDefined) return pieces_[id];
  uint8_t byte = 0;
  if (parse_byte_piece(pieces_[id], &byte)) return std::string(1, static_cast<char>(byte));
  std::string text = replace_all(pieces_[id], kSpaceMarker, " ");
  const bool is_first = prev < 0 || (prev < vocab_size() && types_[prev] == TokenType::kControl);
  if (is_first && metaspace_ && space_prefix_ != SpacePrefix::kNone && !text.empty() && text[0] == ' ') text.erase(0, 1);
  return text;
}

}  // namespace cbatch
