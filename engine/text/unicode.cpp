// Class lookup by binary search over the range table (an ASCII fast path first), and UTF-8 decoding.
#include "engine/text/unicode.hpp"

#include <algorithm>
#include <array>

#include "engine/text/utf8.hpp"

namespace cbatch::unicode {
namespace {

uint8_t lookup(uint32_t cp) {
  const CodepointRange* end = kRanges + kNumRanges;
  const CodepointRange* it =
      std::upper_bound(kRanges, end, cp, [](uint32_t c, const CodepointRange& r) { return c < r.first; });
  if (it == kRanges) return 0;
  --it;
  return cp <= it->last ? it->flags : 0;
}

const std::array<uint8_t, 128>& ascii_flags() {
  static const std::array<uint8_t, 128> table = [] {
    std::array<uint8_t, 128> t{};
    for (uint32_t c = 0; c < 128; ++c) t[c] = lookup(c);
    return t;
  }();
  return table;
}

uint32_t decode_sequence(std::string_view s, size_t pos, size_t length) {
  const auto b = [&](size_t i) { return static_cast<uint32_t>(static_cast<unsigned char>(s[pos + i])); };
  switch (length) {
    case 1: return b(0);
    case 2: return ((b(0) & 0x1F) << 6) | (b(1) & 0x3F);
    case 3: return ((b(0) & 0x0F) << 12) | ((b(1) & 0x3F) << 6) | (b(2) & 0x3F);
    default: return ((b(0) & 0x07) << 18) | ((b(1) & 0x3F) << 12) | ((b(2) & 0x3F) << 6) | (b(3) & 0x3F);
  }
}

}  // namespace

uint8_t flags(uint32_t cp) {
  if (cp < 128) return ascii_flags()[cp];
  return cp == kInvalid ? 0 : lookup(cp);
}

Codepoints decode_utf8(std::string_view text) {
  Codepoints out;
  out.cps.reserve(text.size());
  out.offsets.reserve(text.size() + 1);
  for (size_t pos = 0; pos < text.size();) {
    const Utf8Sequence seq = next_utf8_sequence(text, pos);
    if (seq.is_valid) {
      out.cps.push_back(decode_sequence(text, pos, seq.length));
      out.offsets.push_back(static_cast<uint32_t>(pos));
      pos += seq.length;
    } else {
      for (size_t i = 0; i < seq.length; ++i) {  // each invalid byte stands alone
        out.cps.push_back(kInvalid);
        out.offsets.push_back(static_cast<uint32_t>(pos + i));
      }
      pos += seq.length;
    }
  }
  out.offsets.push_back(static_cast<uint32_t>(text.size()));
  return out;
}

std::string encode_utf8(uint32_t cp) {
  std::string out;
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return out;
}

}  // namespace cbatch::unicode
