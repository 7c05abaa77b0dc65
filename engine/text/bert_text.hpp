// The text stages of a BERT tokenizer, as Hugging Face `tokenizers` runs them: BertNormalizer (clean text:
// drop NUL, U+FFFD and "other" characters, whitespace to " "; spaces around CJK ideographs; strip accents:
// NFD then drop nonspacing marks; per-character lowercase) and BertPreTokenizer (split on White_Space,
// which is dropped, and on punctuation, each punctuation character a word of its own). Text in and out is
// UTF-8; bytes that are not UTF-8 are dropped by clean_text and otherwise kept as letters.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace cbatch::bert {

enum Flag : uint8_t { kOther = 1, kNonspacingMark = 2, kPunctuation = 4 };

struct ClassRange {
  uint32_t first;
  uint32_t last;  // inclusive
  uint8_t flags;
};
struct LowercaseMapping {
  uint32_t cp;
  uint32_t lower[3];  // 0-padded
};

extern const ClassRange kClassRanges[];  // sorted, disjoint (bert_tables.cpp)
extern const size_t kNumClassRanges;
extern const LowercaseMapping kLowercase[];  // sorted by cp
extern const size_t kNumLowercase;

struct NormalizerOptions {
  bool clean_text = true;
  bool handle_chinese_chars = true;
  bool strip_accents = true;  // tokenizer.json's null means: as lowercase
  bool lowercase = true;
};

std::string normalize(std::string_view text, const NormalizerOptions& options);

// The words of normalized text, in order (never empty strings).
std::vector<std::string> pre_tokenize(std::string_view text);

}  // namespace cbatch::bert
