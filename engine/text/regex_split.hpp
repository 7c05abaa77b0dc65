// A Hugging Face Split pre-tokenizer that no hand-written scanner covers: its regex (Oniguruma's dialect,
// rewritten for PCRE2 by onig_pattern.hpp) or literal string, compiled once with PCRE2 (JIT where the
// library has it) and shared by every copy of the tokenizer; `behavior` and `invert` applied as
// `tokenizers` applies them. Matches are found as the Oniguruma binding inside `tokenizers` finds them:
// leftmost-first, each search starting where the last match ended, and an empty match that ends where
// the last match ended skipped (the search moves on one character).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

// PCRE2's handles (pcre2_code_8, pcre2_match_data_8), declared here so that pcre2.h stays in the .cpp.
struct pcre2_real_code_8;
struct pcre2_real_match_data_8;

namespace cbatch {

// What becomes of the matches and the text between them (tokenizers' SplitDelimiterBehavior).
enum class SplitBehavior : uint8_t {
  kIsolated,            // both are pieces
  kRemoved,             // the matches are dropped
  kMergedWithPrevious,  // a match joins the text before it
  kMergedWithNext,      // a match joins the text after it
  kContiguous,          // consecutive matches, and consecutive gaps, join
};

struct ByteSpan {
  size_t begin;
  size_t end;
};

class RegexSplitter {
 public:
  enum class Syntax : uint8_t { kRegex, kLiteral };

  // Throws cbatch::Error naming the pattern and the offset where it cannot be compiled.
  RegexSplitter(std::string_view pattern, Syntax syntax, SplitBehavior behavior, bool invert);
  ~RegexSplitter();
  RegexSplitter(const RegexSplitter&) = delete;
  RegexSplitter& operator=(const RegexSplitter&) = delete;

  // One thread's matching state: the PCRE2 match data and the match list, reused from text to text.
  class Matcher {
   public:
    explicit Matcher(const RegexSplitter& splitter);
    ~Matcher();
    Matcher(const Matcher&) = delete;
    Matcher& operator=(const Matcher&) = delete;

    // Appends the pieces of text in order as byte ranges of it: all of it but what the behaviour
    // removes, no piece empty. Throws cbatch::Error when PCRE2 gives up (its match or depth limit).
    void split(std::string_view text, std::vector<ByteSpan>& pieces);

   private:
    struct Marked {
      size_t begin;
      size_t end;
      bool is_match;
    };
    void find_matches(std::string_view text);

    const RegexSplitter& splitter_;
    pcre2_real_match_data_8* match_data_;
    std::vector<Marked> marked_;   // the matches and the gaps between them, in order
    std::vector<Marked> merged_;   // after the behaviour's fold; is_match there marks what is removed
  };

 private:
  pcre2_real_code_8* code_;  // never changed after construction: shared by threads
  std::string pattern_;
  SplitBehavior behavior_;
  bool invert_;
};

}  // namespace cbatch
