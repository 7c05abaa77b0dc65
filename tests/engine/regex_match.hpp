// Whether a pattern of the constraint regex dialect matches a whole text, through the byte DFA the
// constraints run (engine/constrain/token_automaton.hpp).
#pragma once
#include <string>

#include "engine/constrain/regex_nfa.hpp"
#include "engine/constrain/token_automaton.hpp"

namespace cbatch::test {

inline bool full_match(const std::string& pattern, const std::string& text) {
  ByteDfa dfa(compile_regex(pattern));
  int32_t s = dfa.start();
  for (unsigned char c : text) {
    s = dfa.next(s, c);
    if (s == ByteDfa::kDead) return false;
  }
  return dfa.accepting(s);
}

}  // namespace cbatch::test
