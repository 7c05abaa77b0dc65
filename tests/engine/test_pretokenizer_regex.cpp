// The general Split rule on PCRE2 and the Qwen3.5 scanner: the Oniguruma -> PCRE2 rewrites and refusals
// (with the offsets of the pattern as written), the match loop's empty matches, every behaviour with and
// without invert, literal patterns, invalid UTF-8, a rule's copies sharing one compiled pattern, and the
// Qwen3.5 scanner against the same regex through PCRE2. The expected pieces are what Hugging Face
// `tokenizers` 0.23 gives for the same pattern and text.
#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <vector>

#include "engine/base/error.hpp"
#include "engine/text/onig_pattern.hpp"
#include "engine/text/pretokenizer.hpp"
#include "engine/text/regex_split.hpp"

namespace cbatch {
namespace {

using Pieces = std::vector<std::string>;

constexpr std::string_view kQwen35 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|)"
    R"(\s+(?!\S)|\s+)";

Pieces split(const std::vector<SplitRule>& rules, std::string_view text) {
  Pieces out;
  for (std::string_view piece : PreTokenizer(rules).split(text)) out.emplace_back(piece);
  return out;
}

SplitRule regex_rule(std::string_view pattern, SplitBehavior behavior = SplitBehavior::kIsolated, bool invert = false,
                     RegexSplitter::Syntax syntax = RegexSplitter::Syntax::kRegex) {
  return SplitRule(std::make_shared<const RegexSplitter>(pattern, syntax, behavior, invert));
}

Pieces split_regex(std::string_view pattern, std::string_view text, SplitBehavior behavior = SplitBehavior::kIsolated,
                   bool invert = false) {
  return split({regex_rule(pattern, behavior, invert)}, text);
}

std::string pcre2_text(std::string_view pattern) { return pcre2_from_onig(pattern).text; }

std::string error_of(std::string_view pattern) {
  try {
    RegexSplitter(pattern, RegexSplitter::Syntax::kRegex, SplitBehavior::kIsolated, false);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("Oniguruma patterns are rewritten where PCRE2 reads them differently") {
  CHECK(pcre2_text(R"(\s+(?!\S))") == R"(\p{White_Space}+(?!\P{White_Space}))");
  CHECK(pcre2_text(R"([^\s\p{L}])") == R"([^\p{White_Space}\p{L}])");
  CHECK(pcre2_text(R"(\h\v)") == R"([0-9a-fA-F]\x{0B})");
  CHECK(pcre2_text(R"([\w])") == R"([\p{Alphabetic}\p{M}\p{Nd}\p{Pc}])");  // in a class: no Latin-1 digits
  CHECK(pcre2_text(R"(\w)") == R"([\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\x{B2}\x{B3}\x{B9}\x{BC}-\x{BE}])");
  CHECK(pcre2_text(R"(\p{Letter}\p{decimal_number}\P{^Lu}\p{^N})") == R"(\p{L}\p{Nd}\p{Lu}\P{N})");
  CHECK(pcre2_text(R"(\p{Han}\p{White_Space})") == R"(\p{sc:Han}\p{White_Space})");  // a script: Script, not scx
  CHECK(pcre2_text(R"((?m:.)(?i-m)a{,3}b{2,}c{,})") == R"((?s:.)(?i-s)a{0,3}b{2,}c{,})");
  CHECK(pcre2_text(R"([^(\s|[.,!?])])") == R"([^(\p{White_Space}|.,!?)])");  // BLOOM's nested union
  CHECK(pcre2_text(R"(\u00e9\O)") == R"(\x{00e9}(?s:.))");
  CHECK(pcre2_text(R"([]a](?#[)(?<n>x)\k<n>)") == R"([]a](?#[)(?<n>x)\k<n>)");  // as written
}

TEST_CASE("constructs with no PCRE2 equivalent are refused with the offset in the pattern as written") {
  CHECK(error_of(R"(ab[c&&d])").find("class intersection (&&) is not supported at offset 4") != std::string::npos);
  CHECK(error_of(R"([[:alpha:]])").find("POSIX bracket classes are not supported at offset 1") != std::string::npos);
  CHECK(error_of(R"([a[^b]])").find("negated class inside a class is not supported at offset 2") != std::string::npos);
  CHECK(error_of(R"(x\X)").find("\\X is not supported") != std::string::npos);
  CHECK(error_of(R"((?W)\w)").find("the option 'W' is not supported (i, m, x are) at offset 2") != std::string::npos);
  CHECK(error_of(R"(a{1,3}+)").find("an interval followed by '+' is not supported") != std::string::npos);
  // PCRE2's own errors: its offset in the rewritten pattern maps back to the pattern as written.
  const std::string unmatched = error_of(R"(\s\w))");
  CHECK(unmatched.find("'\\s\\w)' is not a regex cbatch can run: ") == 0);
  CHECK(unmatched.find("at offset 4 (')')") != std::string::npos);
  CHECK(error_of(R"(\p{NoSuchProperty})").find("unknown property") != std::string::npos);
  CHECK(error_of(R"(\p{L}+|\s+)").empty());
}

TEST_CASE("Split behaviours and invert, as tokenizers applies them") {
  using B = SplitBehavior;
  const std::string_view text = "a,,b,c,";
  CHECK(split_regex(",", text) == Pieces{"a", ",", ",", "b", ",", "c", ","});
  CHECK(split_regex(",", text, B::kIsolated, true) == Pieces{"a", ",", ",", "b", ",", "c", ","});
  CHECK(split_regex(",", text, B::kRemoved) == Pieces{"a", "b", "c"});
  CHECK(split_regex(",", text, B::kRemoved, true) == Pieces{",", ",", ",", ","});
  CHECK(split_regex(",", text, B::kMergedWithPrevious) == Pieces{"a,", ",", "b,", "c,"});
  CHECK(split_regex(",", text, B::kMergedWithPrevious, true) == Pieces{"a", ",", ",b", ",c", ","});
  CHECK(split_regex(",", text, B::kMergedWithNext) == Pieces{"a", ",", ",b", ",c", ","});
  CHECK(split_regex(",", text, B::kMergedWithNext, true) == Pieces{"a,", ",", "b,", "c,"});
  CHECK(split_regex(",", text, B::kContiguous) == Pieces{"a", ",,", "b", ",", "c", ","});
  // Empty matches: x* matches empty before "a", "b" and "c"; they merge as tokenizers merges them.
  CHECK(split_regex("x*", "axxbc") == Pieces{"a", "xx", "b", "c"});
  CHECK(split_regex("x*", "axxbc", B::kRemoved, true) == Pieces{"xx"});
  CHECK(split_regex("x*", "axxbc", B::kMergedWithPrevious) == Pieces{"axx", "b", "c"});
  CHECK(split_regex("x*", "axxbc", B::kMergedWithPrevious, true) == Pieces{"a", "xxb", "c"});
  CHECK(split_regex("x*", "axxbc", B::kMergedWithNext) == Pieces{"a", "xxb", "c"});
}

TEST_CASE("the match loop follows Oniguruma's iterator: an empty match where the last one ended is skipped") {
  CHECK(split_regex("a|(?=c)", "abc") == Pieces{"a", "b", "c"});  // (?=c) at 2 is not where "a" ended
  CHECK(split_regex("(?=c)", "abcc") == Pieces{"ab", "c", "c"});
  CHECK(split_regex("", "ab") == Pieces{"a", "b"});
  CHECK(split_regex(R"(\b)", "ab cd") == Pieces{"ab", " ", "cd"});
  CHECK(split_regex("^b", "xa\nby") == Pieces{"xa\n", "b", "y"});  // ^ and $ are line anchors
  CHECK(split_regex("a$", "xa\nby") == Pieces{"x", "a", "\nby"});
  CHECK(split_regex("a.b", "xa\nby") == Pieces{"xa\nby"});          // . is not a newline ...
  CHECK(split_regex("(?m)a.b", "xa\nby") == Pieces{"x", "a\nb", "y"});  // ... unless (?m)
  CHECK(split_regex(R"(\w+)", "x_i\u00b2 y") == Pieces{"x_i\u00b2", " ", "y"});
  CHECK(split_regex(R"([\w]+)", "x_i\u00b2 y") == Pieces{"x_i", "\u00b2 ", "y"});
  CHECK(split_regex(R"(\p{Han}+)", "\u65e5\u672c\u3002") == Pieces{"\u65e5\u672c", "\u3002"});  // 。 is Common
}

TEST_CASE("literal patterns, invalid UTF-8, and a rule's copies sharing one compiled pattern") {
  using Syntax = RegexSplitter::Syntax;
  CHECK(split({regex_rule(".*", SplitBehavior::kIsolated, false, Syntax::kLiteral)}, "a.*b") == Pieces{"a", ".*", "b"});
  CHECK(split({regex_rule("", SplitBehavior::kIsolated, false, Syntax::kLiteral)}, "ab") == Pieces{"a", "b"});
  // An invalid byte never matches (PCRE2) and is "other" (the scanner): both keep it in a piece of its own.
  const std::string gpt2 = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
  const std::string bad = "a\xff" "b c\xe4\xb8 d";
  CHECK(split({regex_rule(gpt2)}, bad) == Pieces{"a", "\xff", "b", " c", "\xe4\xb8", " d"});
  CHECK(split({SplitPattern::kGpt2}, bad) == Pieces{"a", "\xff", "b", " c", "\xe4\xb8", " d"});
  const SplitRule rule = regex_rule(R"(\p{N})");
  const std::vector<SplitRule> copies(3, rule);
  CHECK(copies[2].regex.get() == rule.regex.get());
  CHECK(rule.regex.use_count() == 4);
  // A regex rule after a scanner applies to each of its pieces, and sees only that piece.
  CHECK(split({SplitPattern::kGpt2, regex_rule("^.")}, "ab cd") == Pieces{"a", "b", " ", "cd"});
}

TEST_CASE("Qwen3.5 split: marks stay with their letters, out of symbol runs; digits one by one") {
  const std::vector<SplitRule> qwen35 = {SplitPattern::kQwen35};
  CHECK(split(qwen35, "\u0928\u092e\u0938\u094d\u0924\u0947 \u0926\u0941\u0928\u093f\u092f\u093e") ==
        Pieces{"\u0928\u092e\u0938\u094d\u0924\u0947", " \u0926\u0941\u0928\u093f\u092f\u093e"});
  CHECK(split({SplitPattern::kQwen2}, "\u0928\u092e\u0938\u094d\u0924\u0947") ==
        Pieces{"\u0928\u092e\u0938", "\u094d\u0924", "\u0947"});
  CHECK(split(qwen35, "e\u0301 combining") == Pieces{"e\u0301", " combining"});
  CHECK(split(qwen35, " \u0301x") == Pieces{" \u0301x"});
  CHECK(split(qwen35, "a.\u0301.") == Pieces{"a", ".\u0301", "."});
  CHECK(split(qwen35, "x !\u0301\u0301!\n\ny") == Pieces{"x", " !", "\u0301\u0301", "!\n\n", "y"});
  CHECK(split(qwen35, "I'M 2024") == Pieces{"I", "'M", " ", "2", "0", "2", "4"});
  for (const char* text : {"\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35\u0e04\u0e23\u0e31\u0e1a", "caf\u00e9 na\u0131\u0308ve  \n\n x",
                           "\U0001F468\u200d\U0001F469\u200d\U0001F467 family!!\r\n", "\u65e5\u672c\u8a9e 123 \u0663\u0664"}) {
    CHECK_MESSAGE(split(qwen35, text) == split({regex_rule(kQwen35)}, text), text);
  }
  REQUIRE(split_rules_for_pre("qwen35"));
  CHECK(split_rules_for_pre("qwen35")->front().pattern == SplitPattern::kQwen35);
  CHECK(split_pattern_for_regex(kQwen35) == SplitPattern::kQwen35);
  CHECK(split_pattern_for_regex(R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|)"
                                R"([^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|)"
                                R"(\s*[\r\n]+|\s+(?!\S)|\s+)") == SplitPattern::kQwen35);
}

}  // namespace cbatch
