// A byte-level NFA: states with byte-range edges, epsilon edges and (in a grammar's NFA) rule calls, one
// start and one accepting state. Built by nfa_builder.hpp, from a regex (regex_nfa.hpp) or a grammar's rules
// (grammar.hpp); determinized by token_automaton.hpp's ByteDfa.
#pragma once
#include <cstdint>
#include <vector>

namespace cbatch {

struct NfaEdge {
  uint8_t lo = 0;   // byte range [lo, hi]
  uint8_t hi = 0;
  int32_t to = 0;
};

struct NfaCall {
  int32_t rule = 0;  // a grammar rule (grammar.hpp), matched on a stack of its own
  int32_t to = 0;    // where its match returns
};

struct Nfa {
  struct State {
    std::vector<NfaEdge> edges;
    std::vector<int32_t> epsilon;
    std::vector<NfaCall> calls;  // empty in a regex's NFA
  };
  std::vector<State> states;
  int32_t start = 0;
  int32_t accept = 0;  // the one accepting state
};

}  // namespace cbatch
