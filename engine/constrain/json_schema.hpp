// JSON constraints: any JSON object (json_object), and JSON Schema compiled to the language of the
// documents that validate (properties in schema order, required ones always, optional ones possibly left
// out; whitespace limited to one optional space between tokens so that no output runs away in spaces).
// A schema without recursion or unconstrained values is one regex (regex_nfa.hpp); recursive $refs and
// values of any depth are rules that call each other (grammar.hpp); a top-level enum or const is a choice
// list (choice_trie.hpp). A keyword this compiler cannot enforce throws cbatch::Error naming it.
#pragma once
#include <string_view>

#include "engine/base/constraint_spec.hpp"

namespace cbatch {

// Any JSON object, nested to any depth.
ConstraintSpec json_object_constraint();
// The documents valid under `schema` (JSON text). Throws cbatch::Error.
ConstraintSpec json_schema_constraint(std::string_view schema);

}  // namespace cbatch
