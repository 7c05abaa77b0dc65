// The Precompiled normalizer; see precompiled_charsmap.hpp. The trie walk is Darts-clone's
// commonPrefixSearch: unit fields are has_leaf (bit 8), value (bits 0..30), label (bits 0..7 and 31) and
// offset ((unit >> 10) << ((unit & 0x200) >> 6)).
#include "engine/text/precompiled_charsmap.hpp"

#include <cstring>

#include "engine/base/error.hpp"
#include "engine/text/unicode.hpp"

namespace cbatch {
namespace {

uint32_t offset_of(uint32_t unit) { return (unit >> 10) << ((unit & (1u << 9)) >> 6); }
uint32_t label_of(uint32_t unit) { return unit & ((1u << 31) | 0xFFu); }
bool has_leaf(uint32_t unit) { return ((unit >> 8) & 1u) == 1u; }
uint32_t value_of(uint32_t unit) { return unit & ((1u << 31) - 1); }

// Grapheme_Cluster_Break Control: Cc, Zl, Zp and the format characters (Cf) other than ZWNJ, ZWJ, the
// prepended concatenation marks and the tags; invalid bytes too.
bool is_control(uint32_t cp) {
  return cp < 0x20 || (cp >= 0x7F && cp <= 0x9F) || cp == 0xAD || cp == 0x61C || cp == 0x180E ||
         cp == 0x200B || cp == 0x200E || cp == 0x200F || (cp >= 0x2028 && cp <= 0x202E) ||
         (cp >= 0x2060 && cp <= 0x206F) || cp == 0xFEFF || (cp >= 0xFFF0 && cp <= 0xFFFB) ||
         (cp >= 0x13430 && cp <= 0x1343F) || (cp >= 0x1BCA0 && cp <= 0x1BCA3) || (cp >= 0x1D173 && cp <= 0x1D17A) ||
         (cp >= 0xE0000 && cp <= 0xE001F) || (cp >= 0xE0080 && cp <= 0xE00FF) || (cp >= 0xE01F0 && cp <= 0xE0FFF) ||
         cp == unicode::kInvalid;
}

// Grapheme_Cluster_Break Prepend (the prepended concatenation marks): joins the character after it.
bool is_prepend(uint32_t cp) {
  return (cp >= 0x600 && cp <= 0x605) || cp == 0x6DD || cp == 0x70F || cp == 0x890 || cp == 0x891 || cp == 0x8E2 ||
         cp == 0x110BD || cp == 0x110CD;
}

// Joins the cluster of the character before it (Grapheme_Extend, SpacingMark, ZWJ and the emoji extenders).
bool is_extender(uint32_t cp) {
  if (cp == unicode::kInvalid) return false;
  return (unicode::flags(cp) & unicode::kMark) != 0 || cp == 0x200C || cp == 0x200D || (cp >= 0xFE00 && cp <= 0xFE0F) ||
         (cp >= 0x1F3FB && cp <= 0x1F3FF) || (cp >= 0xE0020 && cp <= 0xE007F) || (cp >= 0xE0100 && cp <= 0xE01EF);
}

// Extended_Pictographic, roughly (the emoji blocks and the older symbols emoji use): what a ZWJ joins.
bool is_pictographic(uint32_t cp) {
  return cp == 0xA9 || cp == 0xAE || cp == 0x203C || cp == 0x2049 || cp == 0x2122 || cp == 0x2139 ||
         (cp >= 0x2194 && cp <= 0x21AA) || (cp >= 0x231A && cp <= 0x23FF) || (cp >= 0x25AA && cp <= 0x27BF) ||
         (cp >= 0x2B05 && cp <= 0x2B55) || cp == 0x3030 || cp == 0x303D || cp == 0x3297 || cp == 0x3299 ||
         (cp >= 0x1F000 && cp <= 0x1FAFF && !(cp >= 0x1F1E6 && cp <= 0x1F1FF) && !(cp >= 0x1F3FB && cp <= 0x1F3FF));
}

// The index one past the cluster that starts at code point i: CR LF; a control alone; else the character,
// its extenders, and after a ZWJ the next pictograph when the cluster began with one.
size_t cluster_end(const std::vector<uint32_t>& cps, size_t i) {
  uint32_t first = cps[i++];
  if (first == '\r' && i < cps.size() && cps[i] == '\n') return i + 1;
  if (is_control(first)) return i;
  while (is_prepend(first) && i < cps.size() && !is_control(cps[i])) first = cps[i++];
  const bool emoji = is_pictographic(first);
  while (i < cps.size() && !is_control(cps[i])) {
    if (is_extender(cps[i])) {
      ++i;
    } else if (emoji && cps[i - 1] == 0x200D && is_pictographic(cps[i])) {
      ++i;
    } else {
      break;
    }
  }
  return i;
}

int base64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

}  // namespace

bool decode_base64(std::string_view text, std::string* out) {
  out->clear();
  uint32_t bits = 0;
  int num_bits = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '=') return text.find_first_not_of('=', i) == std::string_view::npos;
    const int v = base64_value(text[i]);
    if (v < 0) return false;
    bits = (bits << 6) | static_cast<uint32_t>(v);
    num_bits += 6;
    if (num_bits >= 8) {
      num_bits -= 8;
      out->push_back(static_cast<char>((bits >> num_bits) & 0xFF));
    }
  }
  return true;
}

PrecompiledCharsmap::PrecompiledCharsmap(std::string_view blob, const std::string& what) {
  uint32_t trie_bytes = 0;
  if (blob.size() > 4) std::memcpy(&trie_bytes, blob.data(), 4);  // little-endian hosts only, as the loaders
  if (blob.size() <= 4 || trie_bytes >= blob.size() - 4 || trie_bytes % 4 != 0 || trie_bytes == 0) {
    throw Error(what + ": precompiled_charsmap is malformed (its trie size does not fit the " +
                std::to_string(blob.size()) + " bytes)");
  }
  units_.resize(trie_bytes / 4);
  std::memcpy(units_.data(), blob.data() + 4, trie_bytes);
  normalized_ = std::string(blob.substr(4 + trie_bytes));
}

bool PrecompiledCharsmap::transform(std::string_view chunk, std::string_view* replacement) const {
  uint32_t node = offset_of(units_[0]);
  for (unsigned char byte : chunk) {
    node ^= byte;
    if (node >= units_.size() || label_of(units_[node]) != byte) return false;
    const uint32_t unit = units_[node];
    node ^= offset_of(unit);
    if (node >= units_.size()) return false;
    if (has_leaf(unit)) {
      const uint32_t at = value_of(units_[node]);
      if (at >= normalized_.size()) return false;
      const size_t end = normalized_.find('\0', at);
      *replacement = std::string_view(normalized_).substr(at, end == std::string::npos ? std::string::npos : end - at);
      return true;
    }
  }
  return false;
}

std::string PrecompiledCharsmap::normalize(std::string_view text) const {
  const unicode::Codepoints cps = unicode::decode_utf8(text);
  std::string out;
  out.reserve(text.size());
  std::string_view replacement;
  for (size_t i = 0; i < cps.cps.size();) {
    const size_t end = cluster_end(cps.cps, i);
    const std::string_view cluster = text.substr(cps.offsets[i], cps.offsets[end] - cps.offsets[i]);
    if (cluster.size() < 6 && transform(cluster, &replacement)) {
      out.append(replacement);
      i = end;
      continue;
    }
    for (; i < end; ++i) {
      const std::string_view c = text.substr(cps.offsets[i], cps.offsets[i + 1] - cps.offsets[i]);
      out.append(transform(c, &replacement) ? replacement : c);
    }
  }
  return out;
}

}  // namespace cbatch
