// Pre-tokenizers of byte-level BPE: the text is cut into pieces ("words") before BPE merges run inside
// each piece. A pre-tokenizer is a list of split rules applied in order, each to every piece the
// previous rule produced (as llama.cpp and Hugging Face Sequence pre-tokenizers do). The regexes of the
// known families are hand-written scanners that give exactly the matches of the regex named in their
// comment; "isolate" rules cut out their matches and keep the text between as pieces too. Any other
// Hugging Face Split regex runs on PCRE2 (regex_split.hpp), compiled once and shared by the rule's copies.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cbatch {

class RegexSplitter;  // engine/text/regex_split.hpp

enum class SplitPattern : uint8_t {
  kGpt2,     // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  kLlama3,   // (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|
             // \s*[\r\n]+|\s+(?!\S)|\s+
  kQwen2,    // as kLlama3 with \p{N} (one digit per piece) instead of \p{N}{1,3}
  kQwen35,   // (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|
             // \s*[\r\n]+|\s+(?!\S)|\s+   (Qwen2 with marks kept with letters, out of symbol runs)
  kO200k,    // [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|
             // [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|
             // \p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+   (gpt-4o, gpt-oss)
  kIsolateDigits,      // \p{N}, each digit alone (HF Digits(individual_digits=true))
  kIsolateDigitRuns,   // \p{N}+ (HF Digits(individual_digits=false))
  kIsolatePunctuation, // [\p{P}\$\+<=>\^`\|]+
  kIsolateDigitTriples,  // [0-9][0-9][0-9]
  kRegex,    // any other Split: the rule's RegexSplitter
};

// One step of a pre-tokenizer: a scanner, or a compiled Split regex shared by the copies of the rule.
struct SplitRule {
  SplitPattern pattern;
  std::shared_ptr<const RegexSplitter> regex;  // kRegex only

  SplitRule(SplitPattern p) : pattern(p) {}  // implicit: a list of patterns reads as a list of rules
  explicit SplitRule(std::shared_ptr<const RegexSplitter> r) : pattern(SplitPattern::kRegex), regex(std::move(r)) {}
};

class PreTokenizer {
 public:
  PreTokenizer() = default;  // no rules: the whole text is one piece
  explicit PreTokenizer(std::vector<SplitRule> rules) : rules_(std::move(rules)) {}

  // The pieces of text in order, none empty; they cover it exactly unless a Split rule's behaviour
  // removes text. Empty text gives no pieces.
  std::vector<std::string_view> split(std::string_view text) const;
  const std::vector<SplitRule>& rules() const { return rules_; }

 private:
  std::vector<SplitRule> rules_;
};

// The rules of a llama.cpp `tokenizer.ggml.pre` name (GPT-2, StarCoder/SmolLM, Llama 3, Qwen2 and Qwen3.5
// families, gpt-4o's o200k, and "default"); nullopt for a name cbatch does not know.
std::optional<std::vector<SplitRule>> split_rules_for_pre(std::string_view pre);
// The names split_rules_for_pre knows, comma-separated (for error messages).
std::string known_pre_names();

// The scanner a Hugging Face Split pre-tokenizer's regex stands for; nullopt for other regexes.
std::optional<SplitPattern> split_pattern_for_regex(std::string_view regex);

}  // namespace cbatch
