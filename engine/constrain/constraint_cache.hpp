// The run's compiled constraints: each kind of ConstraintSpec to its Constraint (a regex's DFA or a choice
// list's trie as a RegexConstraint, token_automaton.hpp; a grammar's rules as a GrammarConstraint,
// grammar_constraint.hpp), compiled once per distinct spec.
#pragma once
#include <deque>
#include <memory>
#include <string>
#include <unordered_map>

#include "engine/base/constraint_spec.hpp"
#include "engine/constrain/token_automaton.hpp"

namespace cbatch {

// One run's constraints, compiled once per distinct spec (ConstraintSpec::key) while some sequence
// holds it or it is among the kKeepRecent last asked for (so memory follows the constraints in use, not
// every one the run has seen); a refused one is remembered, so its requests cost nothing more.
class ConstraintCache {
 public:
  explicit ConstraintCache(std::shared_ptr<const TokenTrie> trie) : trie_(std::move(trie)) {}
  // Throws cbatch::Error for a constraint the compilers refuse.
  std::shared_ptr<Constraint> get(const ConstraintSpec& spec);

 private:
  std::shared_ptr<Constraint> compile(const ConstraintSpec& spec) const;

  static constexpr size_t kKeepRecent = 16;

  std::shared_ptr<const TokenTrie> trie_;
  std::unordered_map<std::string, std::weak_ptr<Constraint>> compiled_;
  std::deque<std::shared_ptr<Constraint>> recent_;        // the last kKeepRecent returned
  std::unordered_map<std::string, std::string> refused_;  // key -> the error's message
};

}  // namespace cbatch
