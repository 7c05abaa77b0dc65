// The split-rule scanners. Each works on the code points of one piece, [begin, end), and never looks
// past its end (a regex sees only the piece it is applied to). Character classes: whitespace is
// Unicode White_Space (\s), letters \p{L} (Qwen3.5: [\p{L}\p{M}]), numbers \p{N}; everything else
// (invalid bytes included) is "other", [^\s\p{L}\p{N}] (Qwen3.5: [^\s\p{L}\p{M}\p{N}]). A regex rule
// runs on the UTF-8 bytes of each piece; its piece boundaries map back to code points.
#include "engine/text/pretokenizer.hpp"

#include "engine/text/regex_split.hpp"
#include "engine/text/unicode.hpp"

namespace cbatch {
namespace {

enum class Class : uint8_t { kSpace, kLetter, kNumber, kOther };

// kLetterFlags: the unicode flags that make a letter (a compile-time choice: the scanners' inner loops).
template <uint8_t kLetterFlags>
Class class_of(uint32_t cp) {
  const uint8_t f = unicode::flags(cp);
  if (f & unicode::kWhitespace) return Class::kSpace;
  if (f & kLetterFlags) return Class::kLetter;
  if (f & unicode::kNumber) return Class::kNumber;
  return Class::kOther;
}

template <uint8_t kLetterFlags>
struct BasicSpan {
  const uint32_t* cps;
  size_t end;
  uint32_t at(size_t i) const { return cps[i]; }
  Class cls(size_t i) const { return class_of<kLetterFlags>(cps[i]); }
  // First index >= from whose class is not k (at most max_len steps when given).
  size_t run(size_t from, Class k, size_t max_len = SIZE_MAX) const {
    size_t i = from;
    while (i < end && i - from < max_len && cls(i) == k) ++i;
    return i;
  }
};
using Span = BasicSpan<unicode::kLetter>;
using MarkLetterSpan = BasicSpan<unicode::kLetter | unicode::kMark>;  // Qwen3.5: marks are letters too

uint32_t ascii_lower(uint32_t c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }
bool is_newline(uint32_t c) { return c == '\r' || c == '\n'; }

// 's|'t|'re|'ve|'m|'ll|'d at pos (an apostrophe), case-insensitive for the Llama 3 family.
template <class S>
size_t match_contraction(const S& s, size_t pos, bool ignore_case) {
  if (pos + 1 >= s.end) return 0;
  const auto fold = [&](uint32_t c) { return ignore_case ? ascii_lower(c) : c; };
  const uint32_t a = fold(s.at(pos + 1));
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if (pos + 2 >= s.end) return 0;
  const uint32_t b = fold(s.at(pos + 2));
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  return 0;
}

// \s+(?!\S)|\s+ at pos (a whitespace character): a run followed by a non-space leaves its last
// character to the next piece, unless the run is that one character.
template <class S>
size_t match_spaces(const S& s, size_t pos) {
  const size_t q = s.run(pos, Class::kSpace);
  return q < s.end && q - pos > 1 ? q - pos - 1 : q - pos;
}

size_t match_gpt2(const Span& s, size_t pos) {
  if (s.at(pos) == '\'') {
    if (const size_t n = match_contraction(s, pos, false)) return n;
  }
  // ' ?\p{L}+', ' ?\p{N}+', ' ?[^\s\p{L}\p{N}]+': one optional space, then a run of one class.
  const size_t p = s.at(pos) == ' ' && pos + 1 < s.end && s.cls(pos + 1) != Class::kSpace ? pos + 1 : pos;
  const Class k = s.cls(p);
  if (k != Class::kSpace) return s.run(p, k) - pos;
  return match_spaces(s, pos);
}

// The Llama 3 / o200k tail: ' ?[^\s\p{L}\p{N}]+[\r\n]*' (o200k: [\r\n/]*), then \s*[\r\n]+, then spaces.
template <class S>
size_t match_symbols_or_spaces(const S& s, size_t pos, bool slash) {
  const size_t p = s.at(pos) == ' ' && pos + 1 < s.end && s.cls(pos + 1) == Class::kOther ? pos + 1 : pos;
  if (s.cls(p) == Class::kOther) {
    size_t q = s.run(p, Class::kOther);
    while (q < s.end && (is_newline(s.at(q)) || (slash && s.at(q) == '/'))) ++q;
    return q - pos;
  }
  // \s*[\r\n]+: up to the last newline of the whitespace run
  const size_t q = s.run(pos, Class::kSpace);
  for (size_t j = q; j > pos; --j) {
    if (is_newline(s.at(j - 1))) return j - pos;
  }
  return match_spaces(s, pos);
}

template <class S>
size_t match_llama3(const S& s, size_t pos, size_t max_digits) {
  const uint32_t c = s.at(pos);
  const Class k = s.cls(pos);
  if (c == '\'') {
    if (const size_t n = match_contraction(s, pos, true)) return n;
  }
  if (k == Class::kLetter) return s.run(pos, Class::kLetter) - pos;  // [^\r\n\p{L}\p{N}]?\p{L}+
  if (k != Class::kNumber && !is_newline(c) && pos + 1 < s.end && s.cls(pos + 1) == Class::kLetter) {
    return s.run(pos + 1, Class::kLetter) - pos;
  }
  if (k == Class::kNumber) return s.run(pos, Class::kNumber, max_digits) - pos;  // \p{N}{1,3}
  return match_symbols_or_spaces(s, pos, false);
}

// o200k's letter sets: A = [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}] (a word's capitals), B = [\p{Ll}\p{Lm}\p{Lo}\p{M}]
// (its lower-case rest); Lm, Lo and marks are in both.
bool is_o200k_upper(uint32_t c) {
  const uint8_t f = unicode::flags(c);
  return ((f & unicode::kLetter) && !(f & unicode::kLower)) || (f & unicode::kMark);
}
bool is_o200k_lower(uint32_t c) {
  const uint8_t f = unicode::flags(c);
  return ((f & unicode::kLetter) && !(f & unicode::kUpper)) || (f & unicode::kMark);
}

size_t run_of(const Span& s, size_t from, bool (*in_set)(uint32_t)) {
  size_t i = from;
  while (i < s.end && in_set(s.at(i))) ++i;
  return i;
}

// After a word's letters: (?i:'s|'t|'re|'ve|'m|'ll|'d)?
size_t with_contraction(const Span& s, size_t end) {
  return end < s.end && s.at(end) == '\'' ? end + match_contraction(s, end, true) : end;
}

// [^\r\n\p{L}\p{N}]?A*B+C? at q (after the optional prefix): A* gives back characters until B+ can start
// (only Lm, Lo and marks are in both sets). 0 when it does not match.
size_t match_o200k_lower_word(const Span& s, size_t q) {
  const size_t a_end = run_of(s, q, is_o200k_upper);
  for (size_t k = a_end + 1; k-- > q;) {
    if (k < s.end && is_o200k_lower(s.at(k))) return with_contraction(s, run_of(s, k, is_o200k_lower));
  }
  return 0;
}

// o200k (gpt-4o, gpt-oss): [^\r\n\p{L}\p{N}]?A*B+C?|[^\r\n\p{L}\p{N}]?A+B*C?|\p{N}{1,3}|
// ' ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+ with A, B the sets above and C the contractions.
size_t match_o200k(const Span& s, size_t pos) {
  const uint32_t c = s.at(pos);
  const bool has_prefix = s.cls(pos) != Class::kLetter && s.cls(pos) != Class::kNumber && !is_newline(c);
  const size_t starts[2] = {has_prefix ? pos + 1 : pos, pos};
  for (size_t q : starts) {
    if (const size_t end = match_o200k_lower_word(s, q)) return end - pos;
  }
  for (size_t q : starts) {
    const size_t a_end = run_of(s, q, is_o200k_upper);
    if (a_end > q) return with_contraction(s, run_of(s, a_end, is_o200k_lower)) - pos;
  }
  if (s.cls(pos) == Class::kNumber) return s.run(pos, Class::kNumber, 3) - pos;
  return match_symbols_or_spaces(s, pos, true);
}

bool is_punctuation_like(uint32_t c) {  // [\p{P}\$\+<=>\^`\|]
  return (unicode::flags(c) & unicode::kPunctuation) != 0 || c == '$' || c == '+' || c == '<' || c == '=' ||
         c == '>' || c == '^' || c == '`' || c == '|';
}

bool is_ascii_digit(uint32_t c) { return c >= '0' && c <= '9'; }

// Length of the isolate rule's match at pos, 0 when it does not match there.
size_t match_isolated(SplitPattern rule, const Span& s, size_t pos) {
  switch (rule) {
    case SplitPattern::kIsolateDigits:
      return s.cls(pos) == Class::kNumber ? 1 : 0;
    case SplitPattern::kIsolateDigitRuns:
      return s.run(pos, Class::kNumber) - pos;
    case SplitPattern::kIsolatePunctuation: {
      size_t q = pos;
      while (q < s.end && is_punctuation_like(s.at(q))) ++q;
      return q - pos;
    }
    case SplitPattern::kIsolateDigitTriples:
      return pos + 2 < s.end && is_ascii_digit(s.at(pos)) && is_ascii_digit(s.at(pos + 1)) &&
                     is_ascii_digit(s.at(pos + 2))
                 ? 3
                 : 0;
    default:
      return 0;
  }
}

struct Piece {  // code points [begin, end); 32-bit, as decode_utf8's offsets
  Piece() = default;  // trivial, so that a growing vector moves pieces with memmove
  Piece(size_t b, size_t e) : begin(static_cast<uint32_t>(b)), end(static_cast<uint32_t>(e)) {}
  uint32_t begin;
  uint32_t end;
};

bool is_word_scanner(SplitPattern rule) {
  return rule == SplitPattern::kGpt2 || rule == SplitPattern::kLlama3 || rule == SplitPattern::kQwen2 ||
         rule == SplitPattern::kQwen35 || rule == SplitPattern::kO200k;
}

// Appends the pieces that a scanner rule cuts [begin, end) into.
void split_piece(SplitPattern rule, const uint32_t* cps, Piece piece, std::vector<Piece>& out) {
  const Span s{cps, piece.end};
  const MarkLetterSpan qwen35{cps, piece.end};
  if (is_word_scanner(rule)) {
    for (size_t pos = piece.begin; pos < piece.end;) {
      const size_t start = pos;
      pos += rule == SplitPattern::kGpt2     ? match_gpt2(s, pos)
             : rule == SplitPattern::kO200k  ? match_o200k(s, pos)
             : rule == SplitPattern::kQwen35 ? match_llama3(qwen35, pos, 1)
                                             : match_llama3(s, pos, rule == SplitPattern::kLlama3 ? 3 : 1);
      out.emplace_back(start, pos);
    }
    return;
  }
  size_t gap = piece.begin;  // start of the unmatched text before pos
  for (size_t pos = piece.begin; pos < piece.end;) {
    const size_t n = match_isolated(rule, s, pos);
    if (n == 0) {
      ++pos;
      continue;
    }
    if (gap < pos) out.emplace_back(gap, pos);
    out.emplace_back(pos, pos + n);
    pos += n;
    gap = pos;
  }
  if (gap < piece.end) out.emplace_back(gap, piece.end);
}

// Appends the pieces that a regex rule cuts each piece into: it runs on the piece's bytes, and the byte
// boundaries it gives are code point boundaries (PCRE2 matches whole characters and never an invalid
// byte, each of which is a code point of its own here); a boundary found inside one would move forward.
void split_regex(const RegexSplitter& regex, std::string_view text, const unicode::Codepoints& cp,
                 const std::vector<Piece>& pieces, std::vector<Piece>& out) {
  RegexSplitter::Matcher matcher(regex);
  std::vector<ByteSpan> spans;
  for (const Piece piece : pieces) {
    const size_t base = cp.offsets[piece.begin];
    spans.clear();
    matcher.split(text.substr(base, cp.offsets[piece.end] - base), spans);
    size_t index = piece.begin;  // spans come in order, so one cursor maps them all
    const auto index_of = [&](size_t byte) {
      while (index < piece.end && cp.offsets[index] - base < byte) ++index;
      return index;
    };
    for (const ByteSpan span : spans) {
      const size_t begin = index_of(span.begin);
      const size_t end = index_of(span.end);
      if (begin < end) out.emplace_back(begin, end);
    }
  }
}

}  // namespace

std::vector<std::string_view> PreTokenizer::split(std::string_view text) const {
  const unicode::Codepoints cp = unicode::decode_utf8(text);
  std::vector<Piece> pieces;
  if (!cp.cps.empty()) pieces.emplace_back(0, cp.cps.size());
  for (const SplitRule& rule : rules_) {
    std::vector<Piece> next;
    next.reserve(pieces.size() * 2);
    if (rule.pattern == SplitPattern::kRegex) {
      split_regex(*rule.regex, text, cp, pieces, next);
    } else {
      for (const Piece piece : pieces) split_piece(rule.pattern, cp.cps.data(), piece, next);
    }
    pieces = std::move(next);
  }
  std::vector<std::string_view> out;
  out.reserve(pieces.size());
  for (const Piece piece : pieces) {
    out.push_back(text.substr(cp.offsets[piece.begin], cp.offsets[piece.end] - cp.offsets[piece.begin]));
  }
  return out;
}

}  // namespace cbatch
