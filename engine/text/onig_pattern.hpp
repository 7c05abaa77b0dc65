// Hugging Face `tokenizers` compiles a Split regex with Oniguruma (its default syntax, UTF-8); cbatch runs
// it with PCRE2 (UTF, UCP, multi-line, LF newlines). pcre2_from_onig rewrites what the two dialects read
// differently into PCRE2 forms that match the same text; a construct with no such form is refused with its
// offset, never passed through to mean something else. The rewrites:
//   \s \S          -> \p{White_Space} \P{White_Space}      (PCRE2's \s also takes U+180E)
//   \w \W \b \B    -> Oniguruma's word class: Alphabetic, marks, Nd, Pc, and outside a class the Latin-1
//                     digits ²³¹¼½¾ too (as Oniguruma's own tables have it)
//   \h \H          -> [0-9a-fA-F] [^0-9a-fA-F]            (PCRE2: horizontal space)
//   \v             -> \x{0B}                               (PCRE2: vertical space)
//   \O, \uHHHH     -> (?s:.), \x{HHHH}
//   \p{Letter} ... -> \p{L} ...   (general categories by any name, in Oniguruma's loose spelling)
//   \p{Han} ...    -> \p{sc:Han}  (a script: PCRE2's \p{Han} is Script_Extensions, so 。 would be Han)
//   (?m) (?-m)     -> (?s) (?-s)  (Oniguruma's m is dot-all; ^ and $ are always line anchors)
//   {,n}           -> {0,n}
//   [a[bc]]        -> [abc]       (a nested class is a union)
// Refused: class intersection (&&), a negated nested class, POSIX brackets ([:alpha:] is Alphabetic in
// Oniguruma, \p{L} in PCRE2), \W and \H inside a class, \X (grapheme clusters cut differently), \y \Y
// \Q \E, options other than i, m, x, and an interval followed by + (a nested repeat in Oniguruma,
// possessive in PCRE2). Not rewritten, and different: case-insensitive matching folds one character to
// one in PCRE2 (Oniguruma also matches ß to ss), and the Unicode versions (PCRE2's, e.g. 14.0 in 10.42,
// against Oniguruma's) differ on characters assigned since the older one.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace cbatch {

struct Pcre2Pattern {
  std::string text;                     // the PCRE2 pattern
  std::vector<uint32_t> source_offset;  // (text.size() + 1) the Oniguruma offset each byte came from
};

// Throws cbatch::Error naming the pattern, the construct and its offset.
Pcre2Pattern pcre2_from_onig(std::string_view pattern);

// "'PATTERN' is not a regex cbatch can run: REASON at offset N ('TEXT THERE')", as cbatch::Error.
[[noreturn]] void fail_pattern(std::string_view pattern, size_t offset, const std::string& reason);

}  // namespace cbatch
