// Regular expressions (a subset of Python's `re` syntax) compiled to a byte-level NFA, for constrained
// decoding. Supported: literals (UTF-8), escapes (\d \w \s \D \W \S as ASCII classes, as re.ASCII
// reads them; \n \t \r \f \v, escaped punctuation and non-ASCII characters, \xHH up to 7f, \uHHHH),
// '.', character classes of ASCII characters with ranges and negation, groups ( ) and (?: ), alternation,
// one quantifier an atom: * + ? {n} {n,} {n,m} {,m} {,} (counts up to 1000; lazy forms too: a full match
// does not care), and ^ / $ at the ends. A '{' that starts no count is a literal, as in Python. '.' and
// negated classes match whole UTF-8 characters, so a constrained output is always valid UTF-8. Every
// other pattern throws cbatch::Error naming the construct and its offset: what Python refuses too
// (a quantifier after a quantifier or with nothing before it, a bad range) and what this engine does not
// take (backreferences, lookaround, named groups, inline flags, possessive quantifiers, \b \A \Z).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/constrain/nfa.hpp"
#include "engine/constrain/nfa_builder.hpp"

namespace cbatch {

// The language of `pattern` as a full match. Throws cbatch::Error on syntax this engine does not take.
Nfa compile_regex(std::string_view pattern);

// The fragment of a regex in `builder`; with num_rules > 0, (?&N) calls rule N < num_rules (a grammar's
// rules, grammar.hpp). Throws cbatch::Error.
Fragment compile_regex_into(NfaBuilder& builder, std::string_view pattern, int num_rules);

}  // namespace cbatch
