// Fuzz target: arbitrary bytes through the constraint compilers: as a regex (then its DFA, bounded, as
// the engine builds it), as lines of regex rules that call each other (?&N), as a GBNF grammar and as a
// JSON schema. Properties: each either throws cbatch::Error (any other exception escapes and libFuzzer
// reports it) or yields an automaton whose every edge, call and rule stays inside it.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/base/error.hpp"
#include "engine/constrain/grammar.hpp"
#include "engine/constrain/json_schema.hpp"
#include "engine/constrain/token_automaton.hpp"
#include "fuzz_support.hpp"

using namespace cbatch;

namespace {

void check_nfa(const Nfa& nfa, size_t num_rules) {
  const auto n = static_cast<int64_t>(nfa.states.size());
  auto inside = [&](int32_t s) { return s >= 0 && s < n; };
  fuzz::require(inside(nfa.start) && inside(nfa.accept), "start and accept are states");
  for (const Nfa::State& st : nfa.states) {
    for (const NfaEdge& e : st.edges) fuzz::require(e.lo <= e.hi && inside(e.to), "a byte edge inside the NFA");
    for (int32_t t : st.epsilon) fuzz::require(inside(t), "an epsilon edge inside the NFA");
    for (const NfaCall& c : st.calls) {
      fuzz::require(inside(c.to) && c.rule >= 0 && static_cast<size_t>(c.rule) < num_rules, "a call of a rule that exists");
    }
  }
}

void check_grammar_shape(const Grammar& g) {
  fuzz::require(!g.rules.empty() && g.rules.size() == g.names.size(), "one name a rule");
  fuzz::require(g.root >= 0 && static_cast<size_t>(g.root) < g.rules.size(), "the root is a rule");
  check_nfa(g.nfa, g.rules.size());
}

void regex(std::string_view text) {
  Nfa nfa;
  try {
    nfa = compile_regex(text);
  } catch (const Error&) {
    return;
  }
  check_nfa(nfa, 0);
  ByteDfa dfa(std::move(nfa));
  try {
    dfa.build_all(2000);  // the engine's bound is kMaxDfaStates; a smaller one keeps each input fast
  } catch (const Error&) {
    return;
  }
  int32_t s = dfa.start();  // the pattern's own bytes as a text
  for (unsigned char c : text.substr(0, 64)) {
    if ((s = dfa.next(s, c)) == ByteDfa::kDead) break;
    fuzz::require(s < dfa.num_states(), "a DFA state that was built");
  }
}

void regex_rules(std::string_view text) {
  std::vector<std::string> rules;
  for (size_t begin = 0; begin <= text.size() && rules.size() < 8;) {
    const size_t end = std::min(text.find('\n', begin), text.size());
    rules.emplace_back(text.substr(begin, end - begin));
    begin = end + 1;
  }
  try {
    check_grammar_shape(compile_regex_rules(rules));
  } catch (const Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  regex(text);
  regex_rules(text);
  try {
    check_grammar_shape(compile_gbnf(text));
  } catch (const Error&) {
  }
  try {
    check_constraint(json_schema_constraint(text));
  } catch (const Error&) {
  }
  return 0;
}
