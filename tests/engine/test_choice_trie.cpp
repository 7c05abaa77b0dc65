// Choice lists as a byte trie (choice_trie.hpp): 100,000 random choices of about 20 bytes (seeded, some
// of them prefixes of others) compile to at most total bytes + 1 states (the compile time is printed,
// not asserted), and 1,000 sampled choices are walked byte by byte through the trie and token by token
// through the constraint's masks over a small random vocabulary, each mask checked against a brute force
// over the sorted choices; a choice ends exactly where the list has it (EOS), continues exactly where it
// prefixes another, and a non-choice byte is refused. A top-level JSON enum / const compiles to the same.
#include <doctest/doctest.h>

#include <chrono>
#include <cstdio>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "engine/base/error.hpp"
#include "engine/constrain/choice_trie.hpp"
#include "engine/constrain/constraint_cache.hpp"
#include "engine/constrain/constraint_mask.hpp"
#include "engine/constrain/grammar.hpp"
#include "engine/constrain/json_schema.hpp"
#include "engine/sample/token_mask.hpp"
#include "list_tokenizer.hpp"

namespace cbatch {
namespace {

const std::string kAlphabet = "abcdefghijklmnopqrstuvwxyz0123456789 .|()*";

// `count` choices of 16 to 24 bytes of kAlphabet; every 50th is followed by a prefix of itself.
std::vector<std::string> random_choices(std::mt19937& rng, size_t count) {
  std::vector<std::string> choices;
  while (choices.size() < count) {
    std::string c;
    const size_t len = 16 + rng() % 9;
    for (size_t i = 0; i < len; ++i) c += kAlphabet[rng() % kAlphabet.size()];
    choices.push_back(c);
    if (choices.size() % 50 == 0) choices.push_back(c.substr(0, len / 2));
  }
  choices.resize(count);
  return choices;
}

// Some choice starts with `prefix`.
bool is_prefix(const std::set<std::string>& sorted, const std::string& prefix) {
  const auto it = sorted.lower_bound(prefix);
  return it != sorted.end() && it->compare(0, prefix.size(), prefix) == 0;
}

bool has_bit(const uint64_t* words, int32_t t) { return (words[t / 64] >> (t % 64)) & 1; }

}  // namespace

TEST_CASE("choice trie: 100,000 choices compile to a linear trie and constrain tokens exactly") {
  std::mt19937 rng(20240607);
  const std::vector<std::string> choices = random_choices(rng, 100000);
  size_t total_bytes = 0;
  for (const std::string& c : choices) total_bytes += c.size();
  const auto t0 = std::chrono::steady_clock::now();
  auto owned = std::make_unique<ChoiceTrie>(choices);
  const double compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::printf("choice trie: %zu choices, %zu bytes, %d states, compiled in %.1f ms\n", choices.size(), total_bytes,
              owned->num_states(), compile_ms);
  CHECK(static_cast<size_t>(owned->num_states()) <= total_bytes + 1);
  ChoiceTrie& trie = *owned;
  const std::set<std::string> sorted(choices.begin(), choices.end());

  std::vector<std::string> pieces;  // every single byte (so every choice can be spelled), '#', then random pieces
  for (char c : kAlphabet + "#") pieces.emplace_back(1, c);
  for (std::string& p : random_pieces(rng, kAlphabet, 400)) pieces.push_back(std::move(p));
  const int32_t eos = static_cast<int32_t>(pieces.size()) - 1;  // random_pieces ends with an empty piece
  const int32_t hash = static_cast<int32_t>(kAlphabet.size());
  const ListTokenizer tokenizer(pieces);
  const int vocab = tokenizer.vocab_size();
  RegexConstraint constraint(std::move(owned), std::make_shared<TokenTrie>(tokenizer));
  std::vector<uint64_t> words(static_cast<size_t>(token_mask_words(vocab)));

  for (int sample = 0; sample < 1000; ++sample) {
    const std::string& choice = choices[rng() % choices.size()];
    CAPTURE(choice);
    int32_t s = trie.start();  // byte by byte
    for (unsigned char c : choice) {
      REQUIRE(trie.next(s, '#') == ByteAutomaton::kDead);
      s = trie.next(s, c);
      REQUIRE(s != ByteAutomaton::kDead);
    }
    CHECK(trie.accepting(s));
    int32_t state = constraint.start();  // token by token, at random splits of the choice
    std::string done;
    while (true) {
      constraint_token_mask(constraint, state, {eos}, vocab, words.data());
      CHECK(has_bit(words.data(), eos) == (sorted.count(done) == 1));
      CHECK_FALSE(has_bit(words.data(), hash));
      if (sample < 100) {  // the whole mask against the brute force
        for (int32_t t = 0; t < eos; ++t) CHECK(has_bit(words.data(), t) == is_prefix(sorted, done + pieces[static_cast<size_t>(t)]));
      }
      if (done == choice) break;
      std::vector<int32_t> fits;
      for (int32_t t = 0; t < eos; ++t) {
        if (choice.compare(done.size(), pieces[static_cast<size_t>(t)].size(), pieces[static_cast<size_t>(t)]) == 0) fits.push_back(t);
      }
      const int32_t token = fits[rng() % fits.size()];
      REQUIRE(has_bit(words.data(), token));
      state = constraint.advance(state, token);
      REQUIRE(state != ByteAutomaton::kDead);
      done += pieces[static_cast<size_t>(token)];
    }
    CHECK(constraint.accepting(state));
    // At a choice's end: tokens may follow exactly when it is a prefix of another choice.
    const auto after = sorted.upper_bound(choice);
    const bool continues = after != sorted.end() && after->compare(0, choice.size(), choice) == 0;
    bool any_token = false;
    for (int32_t t = 0; t < eos; ++t) any_token = any_token || has_bit(words.data(), t);
    CHECK(any_token == continues);
    CHECK(constraint.advance(state, hash) == ByteAutomaton::kDead);
  }
}

TEST_CASE("choice constraints: literal text, EOS only at a choice, one compiled trie per list, JSON enums") {
  ChoiceTrie trie({"a.b (c)", "yes", "no", "yes", "ye"});
  auto walk = [&](const std::string& text) {
    int32_t s = trie.start();
    for (unsigned char c : text) {
      if ((s = trie.next(s, c)) == ByteAutomaton::kDead) return s;
    }
    return s;
  };
  CHECK(trie.accepting(walk("a.b (c)")));
  CHECK(walk("axb (c)") == ByteAutomaton::kDead);
  CHECK(trie.accepting(walk("ye")));
  CHECK(trie.accepting(walk("yes")));
  CHECK_FALSE(trie.accepting(walk("y")));
  CHECK(trie.num_states() == 1 + 7 + 3 + 2);  // "ye" and the duplicate "yes" add none
  CHECK_THROWS_AS(ChoiceTrie(std::vector<std::string>{}), Error);
  CHECK_THROWS_AS(check_constraint({ConstraintSpec::Kind::kChoice, {}}), Error);

  const ListTokenizer tokenizer({"y", "es", "no", "e", "s"});
  ConstraintCache cache(std::make_shared<TokenTrie>(tokenizer));
  const ConstraintSpec spec{ConstraintSpec::Kind::kChoice, {"yes", "no"}};
  CHECK(cache.get(spec) == cache.get(spec));
  CHECK(cache.get(spec) != cache.get({ConstraintSpec::Kind::kChoice, {"yes", "nope"}}));

  const ConstraintSpec values = json_schema_constraint(R"({"enum": ["a", 1, null, {"k": [true]}], "description": "d"})");
  CHECK(values.kind == ConstraintSpec::Kind::kChoice);
  CHECK(values.texts == std::vector<std::string>{"\"a\"", "1", "null", "{\"k\":[true]}"});
  const ConstraintSpec one = json_schema_constraint(R"({"const": "x"})");
  CHECK((one.kind == ConstraintSpec::Kind::kChoice && one.texts == std::vector<std::string>{"\"x\""}));
  CHECK(json_schema_constraint(R"({"type": "array", "items": {"enum": ["a", "b"]}})").kind != ConstraintSpec::Kind::kChoice);
  CHECK_THROWS_AS(json_schema_constraint(R"({"enum": []})"), Error);
  CHECK_THROWS_AS(json_schema_constraint(R"({"enum": ["a"], "patternProperties": {}})"), Error);
}

}  // namespace cbatch
