// Grammar checks by reachability over the NFA: a rule is nullable when its end is reachable from its
// start through epsilon edges and calls of nullable rules, productive when bytes may be matched too
// (calls of productive rules). Left recursion: a cycle among the calls reachable without a byte.
#include "engine/constrain/grammar.hpp"


#include "engine/base/elide.hpp"
#include "engine/base/error.hpp"
#include "engine/constrain/regex_nfa.hpp"

namespace cbatch {
namespace {

// Whether a rule's end is reachable from its start through epsilon edges, byte edges (through_bytes) and
// calls of rules marked in `passable`; the rules called on the way are added to `called` when given.
class Reach {
 public:
  explicit Reach(const Grammar& g) : g_(g), seen_(g.nfa.states.size(), 0) {}

  bool operator()(int32_t rule, bool through_bytes, const std::vector<bool>& passable, std::vector<int32_t>* called) {
    ++generation_;
    work_ = {g_.rules[static_cast<size_t>(rule)].start};
    bool found = false;
    while (!work_.empty()) {
      const int32_t s = work_.back();
      work_.pop_back();
      if (seen_[static_cast<size_t>(s)] == generation_) continue;
      seen_[static_cast<size_t>(s)] = generation_;
      found = found || s == g_.rules[static_cast<size_t>(rule)].end;
      const Nfa::State& st = g_.nfa.states[static_cast<size_t>(s)];
      work_.insert(work_.end(), st.epsilon.begin(), st.epsilon.end());
      if (through_bytes) {
        for (const NfaEdge& e : st.edges) work_.push_back(e.to);
      }
      for (const NfaCall& c : st.calls) {
        if (called) called->push_back(c.rule);
        if (passable[static_cast<size_t>(c.rule)]) work_.push_back(c.to);
      }
    }
    return found;
  }

 private:
  const Grammar& g_;
  std::vector<uint32_t> seen_;  // (NFA state) generation of its last visit
  uint32_t generation_ = 0;
  std::vector<int32_t> work_;
};

// The least fixpoint of Reach over all rules: a rule is looked at again only when a rule it calls
// becomes passable.
std::vector<bool> rules_reaching_end(const Grammar& g, bool through_bytes) {
  const size_t n = g.rules.size();
  Reach reach(g);
  std::vector<std::vector<int32_t>> callers(n);
  const std::vector<bool> all(n, true);
  for (size_t r = 0; r < n; ++r) {
    std::vector<int32_t> called;
    reach(static_cast<int32_t>(r), true, all, &called);
    for (int32_t c : called) callers[static_cast<size_t>(c)].push_back(static_cast<int32_t>(r));
  }
  std::vector<bool> marked(n, false);
  std::vector<int32_t> work(n);
  for (size_t r = 0; r < n; ++r) work[r] = static_cast<int32_t>(n - 1 - r);
  while (!work.empty()) {
    const int32_t r = work.back();
    work.pop_back();
    if (marked[static_cast<size_t>(r)] || !reach(r, through_bytes, marked, nullptr)) continue;
    marked[static_cast<size_t>(r)] = true;
    work.insert(work.end(), callers[static_cast<size_t>(r)].begin(), callers[static_cast<size_t>(r)].end());
  }
  return marked;
}

void check_left_recursion(const Grammar& g, const std::vector<bool>& nullable) {
  std::vector<std::vector<int32_t>> first_calls(g.rules.size());
  Reach reach(g);
  for (size_t r = 0; r < g.rules.size(); ++r) reach(static_cast<int32_t>(r), false, nullable, &first_calls[r]);
  std::vector<int> color(g.rules.size(), 0);  // 0 new, 1 on the current path, 2 done
  for (size_t root = 0; root < g.rules.size(); ++root) {
    if (color[root] != 0) continue;
    std::vector<std::pair<int32_t, size_t>> path = {{static_cast<int32_t>(root), 0}};  // (rule, next call to follow)
    color[root] = 1;
    while (!path.empty()) {
      auto& [rule, i] = path.back();
      const std::vector<int32_t>& calls = first_calls[static_cast<size_t>(rule)];
      if (i == calls.size()) {
        color[static_cast<size_t>(rule)] = 2;
        path.pop_back();
        continue;
      }
      const int32_t next = calls[i++];
      if (color[static_cast<size_t>(next)] == 1) {
        throw Error("grammar: left recursion through rule '" + elide(g.names[static_cast<size_t>(next)]) +
                    "' (it can call itself before matching a character)");
      }
      if (color[static_cast<size_t>(next)] == 0) {
        color[static_cast<size_t>(next)] = 1;
        path.emplace_back(next, 0);
      }
    }
  }
}

}  // namespace

void check_grammar(const Grammar& g) {
  if (g.rules.size() > kMaxRules) throw Error("grammar: more than " + std::to_string(kMaxRules) + " rules");
  check_left_recursion(g, rules_reaching_end(g, false));
  const std::vector<bool> productive = rules_reaching_end(g, true);
  for (size_t r = 0; r < g.rules.size(); ++r) {
    if (!productive[r]) throw Error("grammar: rule '" + elide(g.names[r]) + "' matches no string (the grammar accepts nothing there)");
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
