// Grammars (grammar.hpp, grammar_constraint.hpp): the GBNF compiler's language against hand-checked
// strings, its errors (position, undefined rule, left recursion, empty language, size bounds), and the
// pushdown masks against a brute force: an independent matcher (explicit stacks, no sharing, no
// caching) run over the whole output so far plus each token's bytes, at random reachable states of
// recursive grammars over a small random vocabulary.
#include <doctest/doctest.h>

#include <random>
#include <set>
#include <string>
#include <vector>

#include "engine/constrain/grammar_constraint.hpp"
#include "engine/constrain/json_schema.hpp"
#include "engine/base/error.hpp"
#include "list_tokenizer.hpp"

namespace cbatch {
namespace {

// Configurations as explicit stacks: the return positions below, the current NFA position on top.
class StackMatcher {
 public:
  explicit StackMatcher(const Grammar& g) : g_(g) {
    for (const Fragment& r : g_.rules) ends_.insert(r.end);
  }
  using Configs = std::set<std::vector<int32_t>>;
  Configs start() const { return closure({{g_.rules[static_cast<size_t>(g_.root)].start}}); }
  Configs feed(Configs configs, const std::string& text) const {
    for (unsigned char c : text) {
      Configs next;
      for (const auto& stack : configs) {
        for (const NfaEdge& e : g_.nfa.states[static_cast<size_t>(stack.back())].edges) {
          if (c < e.lo || c > e.hi) continue;
          std::vector<int32_t> moved = stack;
          moved.back() = e.to;
          next.insert(moved);
        }
      }
      configs = closure(next);
    }
    return configs;
  }
  bool accepting(const Configs& configs) const {
    for (const auto& stack : configs) {
      if (stack.size() == 1 && stack.back() == g_.rules[static_cast<size_t>(g_.root)].end) return true;
    }
    return false;
  }
  // Some configuration can take a byte, or the text is complete.
  bool alive(const Configs& configs) const {
    for (const auto& stack : configs) {
      if (!g_.nfa.states[static_cast<size_t>(stack.back())].edges.empty()) return true;
    }
    return accepting(configs);
  }

 private:
  std::set<std::vector<int32_t>> closure(std::set<std::vector<int32_t>> configs) const {
    std::vector<std::vector<int32_t>> work(configs.begin(), configs.end());
    auto add = [&](std::vector<int32_t> s) {
      if (s.size() <= 64 && configs.insert(s).second) work.push_back(std::move(s));
    };
    while (!work.empty()) {
      const std::vector<int32_t> s = work.back();
      work.pop_back();
      const Nfa::State& st = g_.nfa.states[static_cast<size_t>(s.back())];
      for (int32_t t : st.epsilon) {
        std::vector<int32_t> moved = s;
        moved.back() = t;
        add(moved);
      }
      for (const NfaCall& c : st.calls) {
        std::vector<int32_t> pushed = s;
        pushed.back() = c.to;
        pushed.push_back(g_.rules[static_cast<size_t>(c.rule)].start);
        add(pushed);
      }
      if (ends_.count(s.back()) && s.size() > 1) add(std::vector<int32_t>(s.begin(), s.end() - 1));
    }
    return configs;
  }

  const Grammar& g_;
  std::set<int32_t> ends_;
};

bool matches(const char* gbnf, const std::string& text) {
  const Grammar g = compile_gbnf(gbnf);
  const StackMatcher m(g);
  return m.accepting(m.feed(m.start(), text));
}

std::string error_of(const std::string& gbnf) {
  try {
    compile_gbnf(gbnf);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("GBNF: the language of the supported syntax") {
  struct Case {
    const char* gbnf;
    const char* text;
    bool match;
  };
  const char* parens = "root ::= (\"(\" root \")\")*";
  const char* list = "root ::= \"[\" (item (\",\" item)*)? \"]\"\nitem ::= [0-9]+ | root  # nested lists\n";
  const Case cases[] = {
      {parens, "", true}, {parens, "(()())()", true}, {parens, "(()", false}, {parens, "())", false},
      {list, "[]", true}, {list, "[1,[2,[]],30]", true}, {list, "[1,]", false}, {list, "[[[[[[9]]]]]]", true},
      {"root ::= [^a-c\\n]+", "xé猫😀", true}, {"root ::= [^a-c\\n]+", "xb", false},
      {"root ::= [α-γ]{2,3}", "αβγ", true}, {"root ::= [α-γ]{2,3}", "αδ", false},
      {"root ::= \"\\x41\\u00e9\\U0001F600\\\"\\\\\"", "Aé😀\"\\", true},
      {"root ::= x{2} y?\nx ::= \"a\" | \"b\"\ny ::= \"c\"", "abc", true},
      {"root ::= x{2} y?\nx ::= \"a\" | \"b\"\ny ::= \"c\"", "a", false},
      {"root ::=\n  \"a\"\n  | \"b\"\n", "b", true},
      {"root ::= . .", "é\n", true}, {"root ::= [\\[\\]-]+", "[-]", true},
      {"root ::= e\ne ::= t (\"+\" t)*\nt ::= [0-9] | \"(\" e \")\"", "(1+(2+3))+4", true},
      {"root ::= e\ne ::= t (\"+\" t)*\nt ::= [0-9] | \"(\" e \")\"", "(1+)", false},
      {"root ::= a b\na ::= \"\" | \"x\"\nb ::= a \"y\"", "xy", true},  // nullable calls, not left recursive
  };
  for (const Case& c : cases) {
    CAPTURE(c.gbnf);
    CAPTURE(c.text);
    CHECK(matches(c.gbnf, c.text) == c.match);
  }
}

TEST_CASE("GBNF: errors name the problem and the place") {
  CHECK(error_of("root ::= \"a\" )") == "grammar: unexpected character at line 1 column 14");
  CHECK(error_of("root ::= \"a\"\nroot ::= \"b\"") == "grammar: rule 'root' defined twice at line 2 column 1");
  CHECK(error_of("root ::= x \"a\"\n") == "grammar: undefined rule 'x' at line 1 column 10");
  CHECK(error_of("x ::= \"a\"") == "grammar: no 'root' rule");
  CHECK(error_of("root ::= \"abc") == "grammar: an unterminated string literal at line 1 column 14");
  CHECK(error_of("root ::= [a-") == "grammar: missing ']' at line 1 column 13");
  CHECK(error_of("root ::= \"a\"{3,1}") == "grammar: a repetition {m,n} with n < m at line 1 column 18");
  CHECK(error_of("root ::= \"\\q\"") == "grammar: unknown escape \\q at line 1 column 12");
  CHECK(error_of("root ::= a\na ::= a \"x\" | \"y\"").find("left recursion through rule 'a'") != std::string::npos);
  CHECK(error_of("root ::= b \"x\"\nb ::= c? root\nc ::= \"z\"").find("left recursion") != std::string::npos);  // through a nullable call
  CHECK(error_of("root ::= \"a\" root") == "grammar: rule 'root' matches no string (the grammar accepts nothing there)");
  CHECK(error_of("root ::= [^\\x00-\\U0010FFFF]").find("matches no string") != std::string::npos);
  CHECK(error_of("root ::= ((\"a\"{1000}){1000}){1000}").find("over 200000 states") != std::string::npos);
  CHECK(error_of(std::string(5000, '(') + "root" + std::string(5000, ')')).find("expected a rule name") != std::string::npos);
  CHECK(error_of("root ::= " + std::string(5000, '(') + std::string(5000, ')')).find("nested over 200") != std::string::npos);
  CHECK_THROWS_AS(compile_regex("(?&0)"), Error);  // rule calls only where the caller allows them
}

TEST_CASE("grammar masks equal a per-token brute force at random reachable states") {
  std::mt19937 rng(7);
  const std::vector<std::string> pieces = random_pieces(rng, "()[]ab01 ,\"é", 250);
  const ListTokenizer tokenizer(pieces);
  auto trie = std::make_shared<TokenTrie>(tokenizer);
  std::vector<Grammar> grammars;
  for (const char* gbnf : {"root ::= (\"(\" root \")\" | \"[\" root \"]\")*",
                           "root ::= \"[\" (v (\", \"? v)*)? \"]\"\nv ::= root | [ab]+ | \"\\\"\" [^\"]* \"\\\"\"",
                           "root ::= x y\nx ::= \"a\"* | \"(\" root \")\"\ny ::= \"\" | \"b\" y | \"0\" x"}) {
    grammars.push_back(compile_gbnf(gbnf));
  }
  grammars.push_back(compile_regex_rules(json_object_constraint().texts));
  for (const Grammar& g : grammars) {
    GrammarConstraint constraint(g, trie);
    const StackMatcher reference(g);
    for (int walk = 0; walk < 12; ++walk) {
      int32_t state = constraint.start();
      StackMatcher::Configs configs = reference.start();
      std::string text;
      for (int step = 0; step < 14; ++step) {
        CAPTURE(text);
        const std::vector<uint64_t> mask = constraint.allowed(state);
        std::vector<int32_t> allowed;
        for (int t = 0; t < tokenizer.vocab_size(); ++t) {
          const std::string& piece = pieces[static_cast<size_t>(t)];
          const bool brute = !piece.empty() && reference.alive(reference.feed(configs, piece));
          const bool got = (mask[static_cast<size_t>(t) / 64] >> (t % 64)) & 1;
          CHECK(got == brute);
          if (brute) allowed.push_back(t);
        }
        if (allowed.empty()) break;
        const int32_t token = allowed[rng() % allowed.size()];
        state = constraint.advance(state, token);
        text += pieces[static_cast<size_t>(token)];
        configs = reference.feed(configs, pieces[static_cast<size_t>(token)]);
        REQUIRE(state != ByteDfa::kDead);
        CHECK(constraint.accepting(state) == reference.accepting(configs));
      }
    }
  }
}

}  // namespace cbatch

namespace cbatch {

TEST_CASE("GBNF: hostile grammars stay bounded") {
  std::string chain = "root ::= r1\n";
  for (int i = 1; i < 4000; ++i) chain += std::string("r").append(std::to_string(i)) + " ::= \"a\" r" + std::to_string(i + 1) + "?\n";
  chain += "r4000 ::= \"b\"\n";
  CHECK(matches(chain.c_str(), "aa"));
  CHECK_FALSE(matches(chain.c_str(), "aab"));
  std::string too_many = chain + "r4001 ::= \"c\"\n";
  for (int i = 4002; i <= 5001; ++i) too_many += std::string("r").append(std::to_string(i)) + " ::= \"c\"\n";
  CHECK(error_of(too_many).find("more than 5000 rules") != std::string::npos);
  // Exponentially ambiguous: every split of the x's is a parse; the shared stacks keep it small.
  const ListTokenizer tokenizer({"x", "xx", "xxxx", "y"});
  GrammarConstraint c(compile_gbnf("root ::= a* \"y\"\na ::= \"x\" | \"xx\" | a2\na2 ::= \"x\" a2?"), std::make_shared<TokenTrie>(tokenizer));
  int32_t state = c.start();
  for (int i = 0; i < 200; ++i) {
    CHECK(c.allowed(state)[0] == 0b1111);
    state = c.advance(state, 2);
  }
  CHECK(c.accepting(c.advance(state, 3)));
}

}  // namespace cbatch

namespace cbatch {

TEST_CASE("code point ranges match exactly their characters as UTF-8") {
  std::mt19937 rng(3);
  const uint32_t edges[] = {0, 0x7F, 0x80, 0x7FF, 0x800, 0xD7FF, 0xE000, 0xFFFF, 0x10000, 0x10FFFF};
  auto pick = [&]() { return rng() % 3 == 0 ? edges[rng() % 10] : static_cast<uint32_t>(rng() % 0x110000); };
  for (int trial = 0; trial < 60; ++trial) {
    uint32_t lo = pick(), hi = pick();
    if (lo > hi) std::swap(lo, hi);
    CAPTURE(lo);
    CAPTURE(hi);
    NfaBuilder b;
    ByteDfa dfa(b.take(b.code_points({{lo, hi}})));
    auto accepts = [&](const std::string& text) {
      int32_t s = dfa.start();
      for (unsigned char c : text) {
        if ((s = dfa.next(s, c)) == ByteDfa::kDead) return false;
      }
      return dfa.accepting(s);
    };
    for (int i = 0; i < 300; ++i) {
      const uint32_t c = i < 20 ? (i % 2 ? hi : lo) + static_cast<uint32_t>(i / 2) - 5 : pick();
      if (c > 0x10FFFF) continue;
      const bool surrogate = c >= 0xD800 && c <= 0xDFFF;
      CAPTURE(c);
      CHECK(accepts(utf8_encode(c)) == (c >= lo && c <= hi && !surrogate));
    }
    CHECK_FALSE(accepts("\xC0\x80"));  // overlong forms never match
    CHECK_FALSE(accepts("\xED\xA0\x80"));  // nor an encoded surrogate
  }
}

}  // namespace cbatch

namespace cbatch {

TEST_CASE("right recursion keeps a flat stack: a list of 5,000 items") {
  const ListTokenizer tokenizer({"1", ",", "]"});
  GrammarConstraint c(compile_gbnf("root ::= \"[\"? list \"]\"\nlist ::= \"1\" (\",\" list)?"), std::make_shared<TokenTrie>(tokenizer));
  int32_t state = c.start();
  for (int i = 0; i < 5000; ++i) {
    state = c.advance(state, 0);
    REQUIRE(state != ByteDfa::kDead);
    CHECK(c.allowed(state)[0] == 0b110);
    state = c.advance(state, 1);
    REQUIRE(state != ByteDfa::kDead);
  }
  state = c.advance(c.advance(state, 0), 2);
  REQUIRE(state != ByteDfa::kDead);
  CHECK(c.accepting(state));
  CHECK(c.num_states() < 10);  // the same few states again and again
}

}  // namespace cbatch
