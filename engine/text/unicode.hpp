// Unicode character classes for the pre-tokenizers (letter, number, punctuation, White_Space), from the
// generated range table in unicode_tables.cpp, and UTF-8 <-> code point helpers. Invalid UTF-8 bytes
// decode one by one to kInvalid, which belongs to no class, so every byte of the input keeps a place.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace cbatch::unicode {

enum Flag : uint8_t {
  kLetter = 1, kNumber = 2, kPunctuation = 4, kWhitespace = 8,
  kUpper = 16,  // Lu, Lt (letters also have kLetter; Lm and Lo have neither case)
  kLower = 32,  // Ll
  kMark = 64,   // \p{M}
};

struct CodepointRange {
  uint32_t first;
  uint32_t last;   // inclusive
  uint8_t flags;
};

extern const char* const kUnicodeVersion;
extern const CodepointRange kRanges[];  // sorted, disjoint
extern const size_t kNumRanges;

inline constexpr uint32_t kInvalid = 0xFFFFFFFF;

// The class flags of a code point (0 for kInvalid and unassigned or other code points).
uint8_t flags(uint32_t cp);
inline bool is_letter(uint32_t cp) { return (flags(cp) & kLetter) != 0; }
inline bool is_number(uint32_t cp) { return (flags(cp) & kNumber) != 0; }
inline bool is_whitespace(uint32_t cp) { return (flags(cp) & kWhitespace) != 0; }

// The code points of text, each with the byte offset where it starts; offsets has one more entry,
// text.size(), so code point i spans bytes [offsets[i], offsets[i + 1]).
struct Codepoints {
  std::vector<uint32_t> cps;
  std::vector<uint32_t> offsets;
};
Codepoints decode_utf8(std::string_view text);

// The UTF-8 encoding of a valid code point.
std::string encode_utf8(uint32_t cp);

}  // namespace cbatch::unicode
