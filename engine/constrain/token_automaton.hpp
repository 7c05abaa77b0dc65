// Constrained decoding over tokens: a regex's byte NFA determinized lazily (ByteDfa), the vocabulary's
// byte strings in a trie (TokenTrie, built once per run), and a Constraint that gives, for a DFA state,
// the tokens whose bytes keep the output a prefix of some string of the language (walking the trie with
// the DFA, so tokens sharing a prefix share the work; masks are cached per DFA state) and whether the
// end of text (EOS) is allowed there (the output so far is a full match).
// Not thread-safe: the engine computes a step's masks before sampling spreads over threads.
#pragma once
#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/constrain/regex_nfa.hpp"

namespace cbatch {

class Tokenizer;

class ByteDfa {
 public:
  static constexpr int32_t kDead = -1;
  explicit ByteDfa(Nfa nfa);
  int32_t start() const { return 0; }
  int32_t next(int32_t state, uint8_t byte);  // kDead when no string of the language continues that way
  bool accepting(int32_t state) const { return accepting_[static_cast<size_t>(state)]; }
  int num_states() const { return static_cast<int>(sets_.size()); }

 private:
  int32_t state_of(std::vector<int32_t> nfa_states);  // closure taken; adds a DFA state if new
  void close(std::vector<int32_t>& nfa_states) const;

  Nfa nfa_;
  std::vector<std::vector<int32_t>> sets_;                  // (DFA states) sorted NFA state sets
  std::map<std::vector<int32_t>, int32_t> ids_;
  std::vector<std::array<int32_t, 256>> transitions_;       // kUnknown until computed
  std::vector<bool> accepting_;
};

// The vocabulary's byte strings (each token as it decodes mid-text); tokens that decode to nothing
// (control tokens) are left out: a constraint never allows them.
class TokenTrie {
 public:
  explicit TokenTrie(const Tokenizer& tokenizer);
  int vocab_size() const { return vocab_size_; }
  const std::string& bytes(int32_t token) const { return bytes_[static_cast<size_t>(token)]; }

  struct Node {
    std::vector<std::pair<uint8_t, int32_t>> children;  // (byte, node), sorted by byte
    std::vector<int32_t> tokens;                        // tokens whose bytes end here
  };
  const std::vector<Node>& nodes() const { return nodes_; }

 private:
  int vocab_size_ = 0;
  std::vector<std::string> bytes_;  // (vocab)
  std::vector<Node> nodes_;         // node 0: the root (the empty string)
};

class Constraint {
 public:
  Constraint(Nfa nfa, std::shared_ptr<const TokenTrie> trie);
  int32_t start() const { return dfa_.start(); }
  // The state after the token's bytes, ByteDfa::kDead if they leave the language.
  int32_t advance(int32_t state, int32_t token);
  bool accepting(int32_t state) const { return dfa_.accepting(state); }
  // Bit t set: token t may follow (EOS not included: see accepting()). (ceil(vocab / 64)) words.
  const std::vector<uint64_t>& allowed(int32_t state);

 private:
  ByteDfa dfa_;
  std::shared_ptr<const TokenTrie> trie_;
  std::unordered_map<int32_t, std::vector<uint64_t>> masks_;
};

// One run's constraints, compiled once per distinct pattern.
class ConstraintCache {
 public:
  explicit ConstraintCache(std::shared_ptr<const TokenTrie> trie) : trie_(std::move(trie)) {}
  // Throws cbatch::Error for a pattern the regex compiler refuses.
  std::shared_ptr<Constraint> get(const std::string& regex);

 private:
  std::shared_ptr<const TokenTrie> trie_;
  std::unordered_map<std::string, std::shared_ptr<Constraint>> compiled_;
};

}  // namespace cbatch
