// Grammar checks by reachability over the NFA: a rule is nullable when its end is reachable from its
// start through epsilon edges and calls of nullable rules, productive when bytes may be matched too
// (calls of productive rules). Left recursion: a cycle among the calls reachable without a byte.
#include "engine/constrain/grammar.hpp"

#include <functional>

#include "engine/core/error.hpp"

namespace cbatch {
namespace {

// Whether `rule`'s end is reachable from its start through epsilon edges, byte edges (through_bytes) and
// calls of rules marked in `passable`; the rules called on the way are added to `called` when given.
bool reaches_end(const Grammar& g, int32_t rule, bool through_bytes, const std::vector<bool>& passable,
                 std::vector<int32_t>* called) {
  std::vector<bool> seen(g.nfa.states.size(), false);
  std::vector<int32_t> work{g.rules[static_cast<size_t>(rule)].start};
  bool found = false;
  while (!work.empty()) {
    const int32_t s = work.back();
    work.pop_back();
    if (seen[static_cast<size_t>(s)]) continue;
    seen[static_cast<size_t>(s)] = true;
    if (s == g.rules[static_cast<size_t>(rule)].end) found = true;
    const Nfa::State& st = g.nfa.states[static_cast<size_t>(s)];
    work.insert(work.end(), st.epsilon.begin(), st.epsilon.end());
    if (through_bytes) {
      for (const NfaEdge& e : st.edges) work.push_back(e.to);
    }
    for (const NfaCall& c : st.calls) {
      if (called) called->push_back(c.rule);
      if (passable[static_cast<size_t>(c.rule)]) work.push_back(c.to);
    }
  }
  return found;
}

// The fixpoint of reaches_end over all rules.
std::vector<bool> rules_reaching_end(const Grammar& g, bool through_bytes) {
  std::vector<bool> marked(g.rules.size(), false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < g.rules.size(); ++r) {
      if (!marked[r] && reaches_end(g, static_cast<int32_t>(r), through_bytes, marked, nullptr)) {
        marked[r] = true;
        changed = true;
      }
    }
  }
  return marked;
}

void check_left_recursion(const Grammar& g, const std::vector<bool>& nullable) {
  std::vector<std::vector<int32_t>> first_calls(g.rules.size());
  for (size_t r = 0; r < g.rules.size(); ++r) reaches_end(g, static_cast<int32_t>(r), false, nullable, &first_calls[r]);
  std::vector<int> color(g.rules.size(), 0);  // 0 new, 1 on the path, 2 done
  std::function<void(int32_t)> visit = [&](int32_t r) {
    color[static_cast<size_t>(r)] = 1;
    for (int32_t next : first_calls[static_cast<size_t>(r)]) {
      if (color[static_cast<size_t>(next)] == 1) {
        throw Error("grammar: left recursion through rule '" + g.names[static_cast<size_t>(next)] +
                    "' (it can call itself before matching a character)");
      }
      if (color[static_cast<size_t>(next)] == 0) visit(next);
    }
    color[static_cast<size_t>(r)] = 2;
  };
  for (size_t r = 0; r < g.rules.size(); ++r) {
    if (color[r] == 0) visit(static_cast<int32_t>(r));
  }
}

}  // namespace

void check_grammar(const Grammar& g) {
  check_left_recursion(g, rules_reaching_end(g, false));
  const std::vector<bool> productive = rules_reaching_end(g, true);
  for (size_t r = 0; r < g.rules.size(); ++r) {
    if (!productive[r]) throw Error("grammar: rule '" + g.names[r] + "' matches no string (the grammar accepts nothing there)");
  }
}

Grammar compile_regex_rules(const std::vector<std::string>& regexes) {
  NfaBuilder b;
  Grammar g;
  for (size_t i = 0; i < regexes.size(); ++i) {
    g.rules.push_back(compile_regex_into(b, regexes[i], static_cast<int>(regexes.size())));
    g.names.push_back(i == 0 ? "root" : "rule " + std::to_string(i));
  }
  g.nfa = b.take(g.rules.at(0));
  check_grammar(g);
  return g;
}

}  // namespace cbatch
