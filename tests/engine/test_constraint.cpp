// Constrained decoding: the regex compiler's language (full matches against hand-checked strings), and
// the token masks of Constraint::allowed (a walk of the vocabulary trie) against a brute force that feeds
// every token's bytes through the DFA on its own, at random reachable states of random patterns over a
// small random vocabulary.
#include <doctest/doctest.h>

#include <random>
#include <string>
#include <vector>

#include "engine/constrain/token_automaton.hpp"
#include "engine/core/error.hpp"
#include "engine/text/tokenizer.hpp"

namespace cbatch {
namespace {

bool full_match(const std::string& pattern, const std::string& text) {
  ByteDfa dfa(compile_regex(pattern));
  int32_t s = dfa.start();
  for (unsigned char c : text) {
    s = dfa.next(s, c);
    if (s == ByteDfa::kDead) return false;
  }
  return dfa.accepting(s);
}

class ListTokenizer final : public Tokenizer {
 public:
  explicit ListTokenizer(std::vector<std::string> pieces) : pieces_(std::move(pieces)) {}
  std::vector<int32_t> encode(std::string_view, bool) const override { return {}; }
  std::string decode_piece(int32_t, int32_t id) const override { return pieces_[static_cast<size_t>(id)]; }
  int vocab_size() const override { return static_cast<int>(pieces_.size()); }
  std::string_view kind() const override { return "byte"; }

 private:
  std::vector<std::string> pieces_;
};

}  // namespace

TEST_CASE("regex: full matches of the supported syntax") {
  struct Case {
    const char* pattern;
    const char* text;
    bool match;
  };
  const Case cases[] = {
      {"abc", "abc", true}, {"abc", "ab", false}, {"abc", "abcd", false},
      {"a|bc|", "", true}, {"a|bc", "bc", true}, {"a|bc", "b", false},
      {"a*", "", true}, {"a*", "aaaa", true}, {"a+", "", false}, {"a+b?", "aab", true}, {"(ab)+", "ababab", true},
      {"(ab)+", "aba", false}, {"a{3}", "aaa", true}, {"a{3}", "aa", false}, {"a{2,}", "aaaaa", true},
      {"a{2,3}", "aaaa", false}, {"(?:x|yz){0,2}", "yzx", true}, {"(?:x|yz){0,2}", "xxx", false},
      {"[a-c]+", "abcab", true}, {"[a-c]+", "abd", false}, {"[^a-c]", "d", true}, {"[^a-c]", "é", true},
      {"[^a-c]", "b", false}, {"\\d{3}-\\d{4}", "555-1234", true}, {"\\d", "x", false}, {"\\w+", "a_Z9", true},
      {"\\s", "\t", true}, {"\\S", "é", true}, {".", "\n", false}, {".", "猫", true}, {"..", "猫", false},
      {"\\.\\*", ".*", true}, {"[.*]+", "*.", true}, {"a{", "a{", true}, {"^ab$", "ab", true},
      {"\\x41", "A", true}, {"\\u00e9", "é", true}, {"(a|b)*?c", "abac", true}, {"[\\d.]+", "3.14", true},
      {"[-a]", "-", true}, {"[a-]", "-", true}, {"[]a]", "]", true},
  };
  for (const Case& c : cases) {
    CAPTURE(c.pattern);
    CAPTURE(c.text);
    CHECK(full_match(c.pattern, c.text) == c.match);
  }
  for (const char* bad : {"(a", "a)", "*a", "a{3,1}", "(?=a)", "(?P<n>a)", "\\1", "[a", "[é]", "a**+", "\\q"}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(compile_regex(bad), Error);
  }
  CHECK_THROWS_AS(compile_regex(std::string(5000, '(') + std::string(5000, ')')), Error);  // no stack overflow
  CHECK_THROWS_AS(compile_regex("((a{1000}){1000}){1000}"), Error);                         // no memory blow-up
  CHECK(full_match(choice_regex({"yes", "no", "a.b (c)"}), "a.b (c)"));
  CHECK_FALSE(full_match(choice_regex({"yes", "no", "a.b (c)"}), "axb (c)"));
}

TEST_CASE("constraint masks equal a per-token brute force at random reachable states") {
  std::mt19937 rng(5);
  const std::string alphabet = "ab01 -.(é";
  std::vector<std::string> pieces;
  for (int i = 0; i < 300; ++i) {
    std::string p;
    const int len = 1 + static_cast<int>(rng() % 4);
    for (int j = 0; j < len; ++j) p += alphabet[rng() % alphabet.size()];
    pieces.push_back(p);
  }
  pieces.push_back("");  // a control token: never allowed
  const ListTokenizer tokenizer(pieces);
  auto trie = std::make_shared<TokenTrie>(tokenizer);
  for (const char* pattern : {"(ab|01)+ ?-?", "[ab]{2,5}\\.[0-9]+", "a*b*0?", "(?:\\(a\\) |b\\.)*[^ab]", "é+(ab)?"}) {
    CAPTURE(pattern);
    Constraint constraint(compile_regex(pattern), trie);
    ByteDfa reference(compile_regex(pattern));
    for (int walk = 0; walk < 20; ++walk) {
      int32_t state = constraint.start(), ref_state = reference.start();
      for (int step = 0; step < 12; ++step) {
        const std::vector<uint64_t> mask = constraint.allowed(state);
        std::vector<int32_t> allowed;
        for (int t = 0; t < tokenizer.vocab_size(); ++t) {
          int32_t s = ref_state;
          for (unsigned char c : pieces[static_cast<size_t>(t)]) {
            if (s != ByteDfa::kDead) s = reference.next(s, c);
          }
          const bool brute = !pieces[static_cast<size_t>(t)].empty() && s != ByteDfa::kDead;
          const bool got = (mask[static_cast<size_t>(t) / 64] >> (t % 64)) & 1;
          CHECK(got == brute);
          if (brute) allowed.push_back(t);
        }
        if (allowed.empty()) break;
        const int32_t token = allowed[rng() % allowed.size()];
        state = constraint.advance(state, token);
        for (unsigned char c : pieces[static_cast<size_t>(token)]) ref_state = reference.next(ref_state, c);
        REQUIRE(state != ByteDfa::kDead);
        CHECK(constraint.accepting(state) == reference.accepting(ref_state));
      }
    }
  }
}

}  // namespace cbatch
