// Context-free grammars for constrained decoding: rules whose bodies are byte NFAs with rule-call edges
// (nfa_builder.hpp), all in one NFA. Two sources: GBNF text (llama.cpp's grammar format; gbnf.cpp) and
// a list of regexes that call each other as (?&N) (the JSON schema compiler's recursive references).
// A compiled Grammar is checked: every rule defined, no left recursion (a rule that can call itself
// before matching a byte), every rule matches some string (so the language is not empty).
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "engine/base/constraint_spec.hpp"
#include "engine/constrain/nfa_builder.hpp"

namespace cbatch {

inline constexpr size_t kMaxRules = 5000;

struct Grammar {
  Nfa nfa;                         // every rule's states; nfa.start / nfa.accept: the root rule's
  std::vector<Fragment> rules;     // (rule) its start and end state
  std::vector<std::string> names;  // (rule) for messages
  int32_t root = 0;
};

// GBNF: `name ::= body` rules (a newline ends a body outside parentheses), alternatives `|`, groups,
// postfix * + ? {m} {m,} {m,n}, "literals" and [classes] / [^classes] of code points with escapes
// (\n \r \t \\ \" \[ \] \- \xHH \uHHHH \UHHHHHHHH), '.' (any character), # comments; `root` starts.
// Throws cbatch::Error naming the problem and its line and column.
Grammar compile_gbnf(std::string_view text);

// Rule N is regexes[N] (regex_nfa.hpp's syntax plus (?&M) calls); rule 0 is the root. Throws cbatch::Error.
Grammar compile_regex_rules(const std::vector<std::string>& regexes);

// Throws cbatch::Error for left recursion, a rule that matches nothing, or over kMaxRules rules
// (compile_* call it).
void check_grammar(const Grammar& grammar);

// Compiles the constraint's language (no vocabulary) to check it: throws cbatch::Error where the
// regex, grammar or rules are refused, or a choice list is empty. (The size of a regex's DFA is checked once per run by the
// engine's ConstraintCache, not here for every request.)
void check_constraint(const ConstraintSpec& spec);

}  // namespace cbatch
