// Constrained decoding: the regex compiler's language (full matches against hand-checked strings), and
// the token masks of Constraint::allowed (a walk of the vocabulary trie) against a brute force that feeds
// every token's bytes through the DFA on its own, at random reachable states of random patterns over a
// small random vocabulary.
#include <doctest/doctest.h>

#include <random>
#include <string>
#include <vector>

#include "engine/constrain/json_number.hpp"
#include "engine/constrain/json_schema.hpp"
#include "engine/constrain/constraint_cache.hpp"
#include "engine/constrain/token_automaton.hpp"
#include "engine/base/error.hpp"
#include "list_tokenizer.hpp"
#include "regex_match.hpp"

namespace cbatch {
namespace {

using test::full_match;


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
}

TEST_CASE("constraint masks equal a per-token brute force at random reachable states") {
  std::mt19937 rng(5);
  const std::vector<std::string> pieces = random_pieces(rng, "ab01 -.(é", 300);
  const ListTokenizer tokenizer(pieces);
  auto trie = std::make_shared<TokenTrie>(tokenizer);
  for (const char* pattern : {"(ab|01)+ ?-?", "[ab]{2,5}\\.[0-9]+", "a*b*0?", "(?:\\(a\\) |b\\.)*[^ab]", "é+(ab)?"}) {
    CAPTURE(pattern);
    RegexConstraint constraint(compile_regex(pattern), trie);
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

namespace cbatch {

TEST_CASE("a regex whose DFA explodes is refused, once per run") {
  const ListTokenizer tokenizer({"a", "b"});
  ConstraintCache cache(std::make_shared<TokenTrie>(tokenizer));
  const ConstraintSpec hostile{ConstraintSpec::Kind::kRegex, {"(a|b)*a(a|b){20}"}};
  CHECK_THROWS_WITH_AS(cache.get(hostile), doctest::Contains("grows past 50000 states"), Error);
  CHECK_THROWS_WITH_AS(cache.get(hostile), doctest::Contains("grows past 50000 states"), Error);  // remembered
  const ConstraintSpec fine{ConstraintSpec::Kind::kRegex, {"(a|b)*a(a|b){10}"}};
  CHECK(cache.get(fine) == cache.get(fine));
}

TEST_CASE("JSON number bounds: integers and numbers in range, exactly") {
  std::mt19937 rng(11);
  auto bound = [&]() { return std::optional<double>(static_cast<double>(static_cast<int>(rng() % 2400) - 1200)); };
  for (int trial = 0; trial < 40; ++trial) {
    NumberBounds b;
    if (trial % 4 != 0) b.lo = bound(), b.lo_exclusive = rng() % 2;
    if (trial % 4 != 1) b.hi = bound(), b.hi_exclusive = rng() % 2;
    if (b.lo && b.hi && *b.lo > *b.hi) std::swap(b.lo, b.hi);
    auto inside = [&](double x) {
      return (!b.lo || (b.lo_exclusive ? x > *b.lo : x >= *b.lo)) && (!b.hi || (b.hi_exclusive ? x < *b.hi : x <= *b.hi));
    };
    CAPTURE(trial);
    std::string integer, number;
    try {
      integer = bounded_integer_regex(b);
      number = bounded_number_regex(b);
    } catch (const Error&) {
      CHECK((b.lo && b.hi && *b.hi - *b.lo <= 1 && (b.lo_exclusive || b.hi_exclusive)));  // only an empty range refused
      continue;
    }
    ByteDfa int_dfa(compile_regex(integer)), num_dfa(compile_regex(number));
    auto accepts = [](ByteDfa& dfa, const std::string& text) {
      int32_t s = dfa.start();
      for (unsigned char c : text) {
        if ((s = dfa.next(s, c)) == ByteDfa::kDead) return false;
      }
      return dfa.accepting(s);
    };
    for (int x = -1500; x <= 1500; ++x) {
      CAPTURE(x);
      CHECK(accepts(int_dfa, std::to_string(x)) == inside(x));
      for (const char* frac : {".0", ".5", ".001", ".999"}) {
        std::string text = x == 0 && frac[1] != '0' && rng() % 2 ? "-" : "";
        text += std::to_string(x);
        text += frac;
        CHECK(accepts(num_dfa, text) == inside(std::stod(text)));
      }
    }
    CHECK_FALSE(accepts(int_dfa, "007"));
  }
  CHECK(digit_range_regex(0, 9) == "\\d");
  NumberBounds fractional;
  fractional.lo = 0.5;
  CHECK_THROWS_WITH_AS(bounded_number_regex(fractional), doctest::Contains("'minimum'"), Error);
}

}  // namespace cbatch

TEST_CASE("a schema keyword whose value has the wrong JSON type is an error, not an escaped exception") {
  // Found by fuzzing the request parser: simdjson's own exception escaped and ended the run.
  for (const char* schema : {R"({"enum": 5})", R"({"type": "object", "required": [3]})",
                             R"({"type": "object", "properties": [1]})", R"({"type": ["string", 7]})",
                             R"({"type": "array", "prefixItems": {"a": 1}})"}) {
    CAPTURE(schema);
    CHECK_THROWS_AS(cbatch::json_schema_constraint(schema), cbatch::Error);
  }
}
