// A request's structured-output constraint as the request parser reads it: the kind and its text(s).
// The engine compiles it once per distinct key() in a run (constraint_cache.hpp).
#pragma once
#include <string>
#include <vector>

namespace cbatch {

struct ConstraintSpec {
  enum class Kind { kNone, kRegex, kRegexRules, kGbnf, kChoice };
  Kind kind = Kind::kNone;
  // kRegex: the pattern; kRegexRules: regexes calling each other as (?&N), 0 the root (grammar.hpp);
  // kGbnf: the grammar text; kChoice: the strings, each taken literally (compiled to a trie,
  // choice_trie.hpp).
  std::vector<std::string> texts;

  bool is_set() const { return kind != Kind::kNone; }
  std::string key() const;
};

}  // namespace cbatch
