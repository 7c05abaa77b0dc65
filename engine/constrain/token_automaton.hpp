// Constrained decoding over tokens: a regex's byte NFA determinized lazily (ByteDfa), the vocabulary's
// byte strings in a trie (TokenTrie, built once per run), and a Constraint (a regex's here; a grammar's in
// grammar_constraint.hpp) that gives, for a state,
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

#include "engine/constrain/constraint_spec.hpp"
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
  // Builds every reachable state (bytes grouped into classes the NFA never tells apart); throws
  // cbatch::Error past max_states, so a pattern whose automaton explodes is refused up front.
  void build_all(int max_states);

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

// A compiled constraint over the vocabulary: states are ids the constraint hands out.
class Constraint {
 public:
  virtual ~Constraint() = default;
  virtual int32_t start() const = 0;
  // The state after the token's bytes, ByteDfa::kDead if they leave the language.
  virtual int32_t advance(int32_t state, int32_t token) = 0;
  // The output so far is a string of the language (EOS allowed).
  virtual bool accepting(int32_t state) const = 0;
  // Bit t set: token t may follow (EOS not included: see accepting()). (ceil(vocab / 64)) words.
  virtual const std::vector<uint64_t>& allowed(int32_t state) = 0;
};

// A regular language: the states are the lazily built DFA's.
class RegexConstraint final : public Constraint {
 public:
  RegexConstraint(Nfa nfa, std::shared_ptr<const TokenTrie> trie);
  int32_t start() const override { return dfa_.start(); }
  int32_t advance(int32_t state, int32_t token) override;
  bool accepting(int32_t state) const override { return dfa_.accepting(state); }
  const std::vector<uint64_t>& allowed(int32_t state) override;

 private:
  ByteDfa dfa_;
  std::shared_ptr<const TokenTrie> trie_;
  std::unordered_map<int32_t, std::vector<uint64_t>> masks_;
};

// One run's constraints, compiled once per distinct spec (ConstraintSpec::key).
class ConstraintCache {
 public:
  explicit ConstraintCache(std::shared_ptr<const TokenTrie> trie) : trie_(std::move(trie)) {}
  // Throws cbatch::Error for a constraint the compilers refuse.
  std::shared_ptr<Constraint> get(const ConstraintSpec& spec);

 private:
  std::shared_ptr<const TokenTrie> trie_;
  std::unordered_map<std::string, std::shared_ptr<Constraint>> compiled_;
};

}  // namespace cbatch
