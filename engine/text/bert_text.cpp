// BertNormalizer and BertPreTokenizer over code points; the order of the normalizer's steps is that of
// `tokenizers` (clean text, CJK spacing, strip accents, lowercase). See bert_text.hpp.
#include "engine/text/bert_text.hpp"

#include <algorithm>

#include "engine/text/nfc.hpp"
#include "engine/text/unicode.hpp"

namespace cbatch::bert {
namespace {

using unicode::kInvalid;

uint8_t flags(uint32_t cp) {
  const ClassRange* end = kClassRanges + kNumClassRanges;
  const ClassRange* it =
      std::upper_bound(kClassRanges, end, cp, [](uint32_t c, const ClassRange& r) { return c < r.first; });
  if (it == kClassRanges) return 0;
  --it;
  return cp <= it->last ? it->flags : 0;
}

bool is_whitespace(uint32_t cp) { return cp == '\t' || cp == '\n' || cp == '\r' || unicode::is_whitespace(cp); }

bool is_control(uint32_t cp) { return cp != '\t' && cp != '\n' && cp != '\r' && (flags(cp) & kOther) != 0; }

bool is_chinese_char(uint32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) || (cp >= 0x20000 && cp <= 0x2A6DF) ||
         (cp >= 0x2A700 && cp <= 0x2B73F) || (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

void append_lowercase(uint32_t cp, std::string& out) {
  const LowercaseMapping* end = kLowercase + kNumLowercase;
  const LowercaseMapping* it =
      std::lower_bound(kLowercase, end, cp, [](const LowercaseMapping& m, uint32_t c) { return m.cp < c; });
  if (it == end || it->cp != cp) {
    out += unicode::encode_utf8(cp);
    return;
  }
  for (uint32_t lower : it->lower) {
    if (lower != 0) out += unicode::encode_utf8(lower);
  }
}

// Calls visit(cp, bytes) for each code point of text (kInvalid with the byte for a non-UTF-8 byte).
template <typename Visit>
void for_each_codepoint(std::string_view text, Visit visit) {
  const unicode::Codepoints cps = unicode::decode_utf8(text);
  for (size_t i = 0; i < cps.cps.size(); ++i) {
    visit(cps.cps[i], text.substr(cps.offsets[i], cps.offsets[i + 1] - cps.offsets[i]));
  }
}

std::string clean_and_space(std::string_view text, const NormalizerOptions& o) {
  std::string out;
  out.reserve(text.size());
  for_each_codepoint(text, [&](uint32_t cp, std::string_view bytes) {
    if (o.clean_text && (cp == 0 || cp == 0xFFFD || cp == kInvalid || is_control(cp))) return;
    if (o.clean_text && is_whitespace(cp)) {
      out += ' ';
    } else if (o.handle_chinese_chars && is_chinese_char(cp)) {
      out += ' ';
      out += bytes;
      out += ' ';
    } else {
      out += bytes;
    }
  });
  return out;
}

}  // namespace

std::string normalize(std::string_view text, const NormalizerOptions& o) {
  std::string spaced = clean_and_space(text, o);
  if (!o.strip_accents && !o.lowercase) return spaced;
  const std::string decomposed = o.strip_accents ? unicode::to_nfd(spaced) : std::move(spaced);
  std::string out;
  out.reserve(decomposed.size());
  for_each_codepoint(decomposed, [&](uint32_t cp, std::string_view bytes) {
    if (cp != kInvalid && o.strip_accents && (flags(cp) & kNonspacingMark) != 0) return;
    if (cp != kInvalid && o.lowercase) {
      append_lowercase(cp, out);
    } else {
      out += bytes;
    }
  });
  return out;
}

std::vector<std::string> pre_tokenize(std::string_view text) {
  std::vector<std::string> words;
  std::string word;
  auto flush = [&] {
    if (!word.empty()) words.push_back(std::move(word));
    word.clear();
  };
  for_each_codepoint(text, [&](uint32_t cp, std::string_view bytes) {
    if (cp != kInvalid && unicode::is_whitespace(cp)) {
      flush();
    } else if (cp != kInvalid && (flags(cp) & kPunctuation) != 0) {
      flush();
      words.emplace_back(bytes);
    } else {
      word += bytes;
    }
  });
  flush();
  return words;
}

}  // namespace cbatch::bert
