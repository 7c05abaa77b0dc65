// The constraint key and the parse-time check.
#include "engine/constrain/constraint_spec.hpp"

#include "engine/constrain/grammar.hpp"
#include "engine/core/error.hpp"

namespace cbatch {

std::string ConstraintSpec::key() const {
  std::string k = std::to_string(static_cast<int>(kind));
  for (const std::string& t : texts) {  // appended piece by piece: GCC 12 warns falsely on "..." + string&&
    k += ':';
    k += std::to_string(t.size());
    k += ':';
    k += t;
  }
  return k;
}

void check_constraint(const ConstraintSpec& spec) {
  switch (spec.kind) {
    case ConstraintSpec::Kind::kNone: return;
    case ConstraintSpec::Kind::kRegex: compile_regex(spec.texts.at(0)); return;
    case ConstraintSpec::Kind::kRegexRules: compile_regex_rules(spec.texts); return;
    case ConstraintSpec::Kind::kGbnf: compile_gbnf(spec.texts.at(0)); return;
    case ConstraintSpec::Kind::kChoice:  // any list of strings is a trie; only an empty one is refused
      if (spec.texts.empty()) throw Error("an empty choice list (it accepts nothing)");
      return;
  }
}

}  // namespace cbatch
