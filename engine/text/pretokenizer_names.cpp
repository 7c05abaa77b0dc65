// Which split rules a pre-tokenizer name or regex stands for. The tokenizer.ggml.pre names are those
// llama.cpp maps to the GPT-2, StarCoder/SmolLM, Llama 3, Qwen2 (Feb 2025), Qwen3.5 and gpt-4o (o200k)
// patterns, plus its "default" BPE split; the regexes are the ones Hugging Face tokenizer.json files spell
// out (Qwen3.5's also as llama.cpp spells it).
#include <string_view>

#include "engine/text/pretokenizer.hpp"

namespace cbatch {
namespace {

using R = SplitPattern;

struct PreFamily {
  std::vector<std::string_view> names;
  std::vector<SplitRule> rules;
};

const std::vector<PreFamily>& pre_families() {
  static const std::vector<PreFamily> families = {
      {{"gpt-2", "phi-2", "roberta-bpe", "jina-es", "jina-de", "jina-v1-en", "jina-v2-es", "jina-v2-de",
        "jina-v2-code", "gigachat", "mpt", "olmo", "jais"},
       {R::kGpt2}},
      {{"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b"},
       {R::kIsolateDigits, R::kGpt2}},
      {{"llama3", "llama-v3", "llama-bpe", "falcon3", "dbrx", "smaug-bpe"}, {R::kLlama3}},
      {{"qwen2", "stablelm2", "deepseek-r1-qwen", "megrez"}, {R::kQwen2}},
      {{"qwen35"}, {R::kQwen35}},
      {{"gpt-4o"}, {R::kO200k}},
      {{"default"}, {R::kIsolatePunctuation, R::kGpt2, R::kIsolateDigitRuns, R::kIsolateDigitTriples}},
  };
  return families;
}

constexpr std::string_view kGpt2Regex = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr std::string_view kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kQwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kQwen35Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|)"
    R"(\s+(?!\S)|\s+)";
// llama.cpp's spelling (LLAMA_VOCAB_PRE_TYPE_QWEN35): the contractions without (?i:), ASCII cases only.
constexpr std::string_view kQwen35RegexLlamaCpp =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}|)"
    R"( ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

constexpr std::string_view kO200kRegex =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|)"
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|)"
    R"(\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

}  // namespace

std::optional<std::vector<SplitRule>> split_rules_for_pre(std::string_view pre) {
  for (const PreFamily& family : pre_families()) {
    for (std::string_view name : family.names) {
      if (name == pre) return family.rules;
    }
  }
  return std::nullopt;
}

std::string known_pre_names() {
  std::string out;
  for (const PreFamily& family : pre_families()) {
    for (std::string_view name : family.names) {
      if (!out.empty()) out += ", ";
      out += name;
    }
  }
  return out;
}

std::optional<SplitPattern> split_pattern_for_regex(std::string_view regex) {
  if (regex == kGpt2Regex) return SplitPattern::kGpt2;
  if (regex == kLlama3Regex) return SplitPattern::kLlama3;
  if (regex == kQwen2Regex) return SplitPattern::kQwen2;
  if (regex == kQwen35Regex || regex == kQwen35RegexLlamaCpp) return SplitPattern::kQwen35;
  if (regex == kO200kRegex) return SplitPattern::kO200k;
  return std::nullopt;
}

}  // namespace cbatch
