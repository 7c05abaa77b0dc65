// Leftmost-longest matching of special-token texts, bucketed by first byte.
#include "engine/text/special_tokens.hpp"

#include <algorithm>

namespace cbatch {

void SpecialTokenMatcher::add(const std::string& text, int32_t id) {
  if (text.empty()) return;
  auto& bucket = by_first_byte_[static_cast<uint8_t>(text[0])];
  for (const auto& entry : bucket) {
    if (entry.first == text) return;
  }
  const auto longer = [](const std::pair<std::string, int32_t>& a, const std::pair<std::string, int32_t>& b) {
    return a.first.size() > b.first.size();
  };
  bucket.insert(std::upper_bound(bucket.begin(), bucket.end(), std::make_pair(text, id), longer),
                std::make_pair(text, id));
  ++num_tokens_;
}

size_t SpecialTokenMatcher::match_at(std::string_view text, size_t pos, int32_t* id) const {
  for (const auto& [token, token_id] : by_first_byte_[static_cast<uint8_t>(text[pos])]) {
    if (text.compare(pos, token.size(), token) == 0) {
      *id = token_id;
      return token.size();
    }
  }
  return 0;
}

std::vector<TextFragment> SpecialTokenMatcher::split(std::string_view text) const {
  std::vector<TextFragment> out;
  size_t raw_begin = 0;
  for (size_t pos = 0; pos < text.size() && num_tokens_ > 0;) {
    int32_t id = -1;
    const size_t length = match_at(text, pos, &id);
    if (length == 0) {
      ++pos;
      continue;
    }
    if (raw_begin < pos) out.push_back({text.substr(raw_begin, pos - raw_begin), -1});
    out.push_back({{}, id});
    pos += length;
    raw_begin = pos;
  }
  if (raw_begin < text.size()) out.push_back({text.substr(raw_begin), -1});
  return out;
}

}  // namespace cbatch
