#include "engine/constrain/constraint_cache.hpp"

#include "engine/base/error.hpp"
#include "engine/constrain/choice_trie.hpp"
#include "engine/constrain/grammar_constraint.hpp"

namespace cbatch {

std::shared_ptr<Constraint> ConstraintCache::get(const ConstraintSpec& spec) {
  const std::string key = spec.key();
  std::shared_ptr<Constraint> constraint;
  if (const auto it = compiled_.find(key); it != compiled_.end()) constraint = it->second.lock();
  if (!constraint) {
    if (const auto it = refused_.find(key); it != refused_.end()) throw Error(it->second);
    try {
      constraint = compile(spec);
    } catch (const Error& e) {
      refused_.emplace(key, e.what());
      throw;
    }
    if (compiled_.size() >= 2 * kKeepRecent) {  // forget the ones nobody holds any more
      for (auto it = compiled_.begin(); it != compiled_.end();) it = it->second.expired() ? compiled_.erase(it) : std::next(it);
    }
    compiled_[key] = constraint;
  }
  recent_.push_back(constraint);
  if (recent_.size() > kKeepRecent) recent_.pop_front();
  return constraint;
}

std::shared_ptr<Constraint> ConstraintCache::compile(const ConstraintSpec& spec) const {
  switch (spec.kind) {
    case ConstraintSpec::Kind::kNone: break;
    case ConstraintSpec::Kind::kRegex: return std::make_shared<RegexConstraint>(compile_regex_dfa(spec.texts.at(0)), trie_);
    case ConstraintSpec::Kind::kChoice: return std::make_shared<RegexConstraint>(std::make_unique<ChoiceTrie>(spec.texts), trie_);
    case ConstraintSpec::Kind::kRegexRules: return std::make_shared<GrammarConstraint>(compile_regex_rules(spec.texts), trie_);
    case ConstraintSpec::Kind::kGbnf: return std::make_shared<GrammarConstraint>(compile_gbnf(spec.texts.at(0)), trie_);
  }
  throw Error("internal: no constraint to compile");
}

}  // namespace cbatch
