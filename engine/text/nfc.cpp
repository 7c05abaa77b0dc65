// NFC as Unicode's UAX #15 describes it: full canonical decomposition (recursive table lookups and
// Hangul arithmetic), a stable sort of each run of non-starters by combining class, then composition
// of each character with the last starter when nothing between blocks it.
#include "engine/text/nfc.hpp"

#include <algorithm>
#include <vector>

#include "engine/text/unicode.hpp"

namespace cbatch::unicode {
namespace {

constexpr uint32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr uint32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount, kSCount = kLCount * kNCount;

struct Char {
  uint32_t cp;        // kInvalid for a byte that is not UTF-8 (kept in `byte`)
  uint8_t ccc;
  uint8_t byte;
};

void decompose(uint32_t cp, std::vector<Char>& out) {
  if (cp >= kSBase && cp < kSBase + kSCount) {
    const uint32_t s = cp - kSBase;
    out.push_back({kLBase + s / kNCount, 0, 0});
    out.push_back({kVBase + (s % kNCount) / kTCount, 0, 0});
    if (s % kTCount != 0) out.push_back({kTBase + s % kTCount, 0, 0});
    return;
  }
  const Decomposition* end = kDecompositions + kNumDecompositions;
  const Decomposition* it =
      std::lower_bound(kDecompositions, end, cp, [](const Decomposition& d, uint32_t c) { return d.cp < c; });
  if (it == end || it->cp != cp) {
    out.push_back({cp, combining_class(cp), 0});
    return;
  }
  decompose(it->first, out);
  if (it->second != 0) decompose(it->second, out);
}

// The primary composite of (first, second), or 0.
uint32_t compose(uint32_t first, uint32_t second) {
  if (first >= kLBase && first < kLBase + kLCount && second >= kVBase && second < kVBase + kVCount) {
    return kSBase + ((first - kLBase) * kVCount + (second - kVBase)) * kTCount;
  }
  if (first >= kSBase && first < kSBase + kSCount && (first - kSBase) % kTCount == 0 && second > kTBase &&
      second < kTBase + kTCount) {
    return first + (second - kTBase);
  }
  const Composition* end = kCompositions + kNumCompositions;
  const Composition* it = std::lower_bound(kCompositions, end, std::make_pair(first, second),
                                           [](const Composition& c, const std::pair<uint32_t, uint32_t>& key) {
                                             return std::make_pair(c.first, c.second) < key;
                                           });
  return it != end && it->first == first && it->second == second ? it->composite : 0;
}

void order_marks(std::vector<Char>& chars) {
  for (size_t begin = 0; begin < chars.size();) {
    if (chars[begin].ccc == 0) {
      ++begin;
      continue;
    }
    size_t end = begin;
    while (end < chars.size() && chars[end].ccc != 0) ++end;
    std::stable_sort(chars.begin() + begin, chars.begin() + end,
                     [](const Char& a, const Char& b) { return a.ccc < b.ccc; });
    begin = end;
  }
}

void compose_all(std::vector<Char>& chars) {
  size_t out = 0;
  long starter = -1;  // output index of the last starter, -1 before one (or after invalid bytes)
  int last_ccc = 0;   // combining class of the last character written
  for (const Char& c : chars) {
    // c is blocked from the starter when a character between has class 0 or >= c's own.
    const bool adjacent = starter >= 0 && out == static_cast<size_t>(starter) + 1;
    if (starter >= 0 && c.cp != kInvalid && (adjacent || last_ccc < c.ccc)) {
      if (const uint32_t composite = compose(chars[starter].cp, c.cp)) {
        chars[starter].cp = composite;
        continue;
      }
    }
    chars[out++] = c;
    if (c.ccc == 0) starter = c.cp == kInvalid ? -1 : static_cast<long>(out - 1);
    last_ccc = c.ccc;
  }
  chars.resize(out);
}

}  // namespace

uint8_t combining_class(uint32_t cp) {
  const CombiningClassRange* end = kCombiningClasses + kNumCombiningClasses;
  const CombiningClassRange* it = std::upper_bound(
      kCombiningClasses, end, cp, [](uint32_t c, const CombiningClassRange& r) { return c < r.first; });
  if (it == kCombiningClasses) return 0;
  --it;
  return cp <= it->last ? it->ccc : 0;
}

namespace {

// Full canonical decomposition in canonical order: NFD as Char records.
std::vector<Char> decomposed(std::string_view text) {
  const Codepoints cps = decode_utf8(text);
  std::vector<Char> chars;
  chars.reserve(cps.cps.size() + 8);
  for (size_t i = 0; i < cps.cps.size(); ++i) {
    if (cps.cps[i] == kInvalid) {
      chars.push_back({kInvalid, 0, static_cast<uint8_t>(text[cps.offsets[i]])});
    } else {
      decompose(cps.cps[i], chars);
    }
  }
  order_marks(chars);
  return chars;
}

std::string encode_chars(const std::vector<Char>& chars, size_t size_hint) {
  std::string out;
  out.reserve(size_hint);
  for (const Char& c : chars) {
    if (c.cp == kInvalid) {
      out.push_back(static_cast<char>(c.byte));
    } else {
      out += encode_utf8(c.cp);
    }
  }
  return out;
}

bool is_ascii(std::string_view text) {
  return std::all_of(text.begin(), text.end(), [](char c) { return static_cast<uint8_t>(c) < 0x80; });
}

}  // namespace

std::string to_nfc(std::string_view text) {
  if (is_ascii(text)) return std::string(text);
  std::vector<Char> chars = decomposed(text);
  compose_all(chars);
  return encode_chars(chars, text.size());
}

std::string to_nfd(std::string_view text) {
  if (is_ascii(text)) return std::string(text);
  return encode_chars(decomposed(text), text.size() + 8);
}

}  // namespace cbatch::unicode
