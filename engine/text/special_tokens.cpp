// Leftmost-longest matching of special-token texts, bucketed by first byte; lstrip / rstrip extend a
// match over the Unicode White_Space around it, as Hugging Face's AddedVocabulary does.
#include "engine/text/special_tokens.hpp"

#include <algorithm>

#include "engine/text/unicode.hpp"
#include "engine/text/utf8.hpp"

namespace cbatch {
namespace {

// The end of the whitespace run starting at `pos`.
size_t skip_whitespace(std::string_view text, size_t pos) {
  while (pos < text.size()) {
    const Utf8Sequence seq = next_utf8_sequence(text, pos);
    const unicode::Codepoints cp = unicode::decode_utf8(text.substr(pos, seq.length));
    if (!seq.is_valid || !unicode::is_whitespace(cp.cps[0])) break;
    pos += seq.length;
  }
  return pos;
}

// The start of the whitespace run ending at `end`, not before `floor`.
size_t skip_whitespace_back(std::string_view text, size_t end, size_t floor) {
  while (end > floor) {
    size_t begin = end - 1;
    while (begin > floor && (static_cast<uint8_t>(text[begin]) & 0xC0) == 0x80) --begin;
    if (skip_whitespace(text.substr(0, end), begin) != end) break;
    end = begin;
  }
  return end;
}

}  // namespace

void SpecialTokenMatcher::add(const std::string& text, int32_t id, WhitespaceStrip strip) {
  if (text.empty()) return;
  auto& bucket = by_first_byte_[static_cast<uint8_t>(text[0])];
  for (const Entry& entry : bucket) {
    if (entry.text == text) return;
  }
  const auto longer = [](const Entry& a, const Entry& b) { return a.text.size() > b.text.size(); };
  Entry entry{text, id, strip};
  bucket.insert(std::upper_bound(bucket.begin(), bucket.end(), entry, longer), entry);
  ++num_tokens_;
}

void SpecialTokenMatcher::add_all(std::vector<Token> tokens) {
  std::array<bool, 256> touched{};
  std::vector<std::string_view> seen;  // texts already registered, to keep the first id of duplicates
  for (const auto& bucket : by_first_byte_) {
    for (const Entry& entry : bucket) seen.push_back(entry.text);
  }
  std::sort(seen.begin(), seen.end());
  std::stable_sort(tokens.begin(), tokens.end(), [](const Token& a, const Token& b) { return a.text < b.text; });
  // `seen` views the buckets' strings, so nothing is added to a bucket before every token is checked.
  std::vector<const Token*> added;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const Token& token = tokens[i];
    const bool duplicate = (i > 0 && tokens[i - 1].text == token.text) ||
                           std::binary_search(seen.begin(), seen.end(), std::string_view(token.text));
    if (!token.text.empty() && !duplicate) added.push_back(&token);
  }
  for (const Token* token : added) {
    const uint8_t first = static_cast<uint8_t>(token->text[0]);
    touched[first] = true;
    by_first_byte_[first].push_back(*token);
    ++num_tokens_;
  }
  const auto longer = [](const Entry& a, const Entry& b) { return a.text.size() > b.text.size(); };
  for (size_t b = 0; b < 256; ++b) {
    if (touched[b]) std::stable_sort(by_first_byte_[b].begin(), by_first_byte_[b].end(), longer);
  }
}

const SpecialTokenMatcher::Entry* SpecialTokenMatcher::match_at(std::string_view text, size_t pos) const {
  for (const Entry& entry : by_first_byte_[static_cast<uint8_t>(text[pos])]) {
    if (text.compare(pos, entry.text.size(), entry.text) == 0) return &entry;
  }
  return nullptr;
}

std::vector<TextFragment> SpecialTokenMatcher::split(std::string_view text) const {
  std::vector<TextFragment> out;
  size_t raw_begin = 0;
  for (size_t pos = 0; pos < text.size() && num_tokens_ > 0;) {
    const Entry* entry = match_at(text, pos);
    if (entry == nullptr) {
      ++pos;
      continue;
    }
    const size_t raw_end = entry->strip.left ? skip_whitespace_back(text, pos, raw_begin) : pos;
    if (raw_begin < raw_end) out.push_back({text.substr(raw_begin, raw_end - raw_begin), -1});
    out.push_back({{}, entry->id});
    pos += entry->text.size();
    if (entry->strip.right) pos = skip_whitespace(text, pos);
    raw_begin = pos;
  }
  if (raw_begin < text.size()) out.push_back({text.substr(raw_begin), -1});
  return out;
}

}  // namespace cbatch
