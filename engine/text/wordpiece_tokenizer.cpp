// WordPiece encoding and decoding; see wordpiece_tokenizer.hpp. Decoding follows the WordPiece decoder:
// a "##" continuation joins its word, any other token is preceded by a space (except the first).
#include "engine/text/wordpiece_tokenizer.hpp"

#include "engine/base/error.hpp"
#include "engine/text/unicode.hpp"

namespace cbatch {

WordPieceTokenizer::WordPieceTokenizer(WordPieceSpec spec) : spec_(std::move(spec)) {
  std::vector<SpecialTokenMatcher::Token> specials;
  for (size_t id = 0; id < spec_.tokens.size(); ++id) {
    if (spec_.types[id] == TokenType::kUnused) continue;
    ids_.emplace(spec_.tokens[id], static_cast<int32_t>(id));
    if (spec_.types[id] == TokenType::kControl || spec_.types[id] == TokenType::kUserDefined) {
      specials.push_back({spec_.tokens[id], static_cast<int32_t>(id), {}});
    }
  }
  specials_.add_all(std::move(specials));
  bos_id_ = spec_.prefix_ids.empty() ? -1 : spec_.prefix_ids.front();
  if (!spec_.suffix_ids.empty()) eos_ids_.push_back(spec_.suffix_ids.back());
}

void WordPieceTokenizer::encode_word(const std::string& word, std::vector<int32_t>& out) const {
  const unicode::Codepoints cps = unicode::decode_utf8(word);
  const size_t num_chars = cps.cps.size();
  if (num_chars > static_cast<size_t>(spec_.max_input_chars_per_word)) {
    out.push_back(spec_.unk_id);
    return;
  }
  const size_t first_out = out.size();
  std::string piece;
  for (size_t start = 0; start < num_chars;) {
    size_t end = num_chars;
    int32_t found = -1;
    for (; end > start; --end) {
      piece = start > 0 ? spec_.continuing_prefix : std::string();
      piece.append(word, cps.offsets[start], cps.offsets[end] - cps.offsets[start]);
      if (auto it = ids_.find(piece); it != ids_.end()) {
        found = it->second;
        break;
      }
    }
    if (found < 0) {  // no piece matches here: the whole word is unknown
      out.resize(first_out);
      out.push_back(spec_.unk_id);
      return;
    }
    out.push_back(found);
    start = end;
  }
}

std::vector<int32_t> WordPieceTokenizer::encode(std::string_view text, bool add_special) const {
  std::vector<int32_t> out;
  if (add_special) out = spec_.prefix_ids;
  for (const TextFragment& fragment : specials_.split(text)) {
    if (fragment.token >= 0) {
      out.push_back(fragment.token);
      continue;
    }
    const std::string normalized =
        spec_.has_normalizer ? bert::normalize(fragment.text, spec_.normalizer) : std::string(fragment.text);
    for (const std::string& word : bert::pre_tokenize(normalized)) encode_word(word, out);
  }
  if (add_special) out.insert(out.end(), spec_.suffix_ids.begin(), spec_.suffix_ids.end());
  return out;
}

EncodedPair WordPieceTokenizer::encode_pair(std::string_view a, std::string_view b) const {
  return join_pair(spec_.pair_template, [&](int sequence) { return encode(sequence == 0 ? a : b, false); });
}

std::string WordPieceTokenizer::decode_piece(int32_t prev, int32_t id) const {
  if (id < 0 || id >= vocab_size()) return "";
  if (spec_.types[id] == TokenType::kControl) return "";
  const std::string& text = spec_.tokens[id];
  const std::string& prefix = spec_.continuing_prefix;
  if (text.compare(0, prefix.size(), prefix) == 0 && text.size() > prefix.size()) return text.substr(prefix.size());
  const bool is_first = prev < 0 || (prev < vocab_size() && spec_.types[prev] == TokenType::kControl);
  return is_first ? text : " " + text;
}

}  // namespace cbatch
