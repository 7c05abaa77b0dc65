// Constrained decoding over tokens: a deterministic byte automaton (ByteAutomaton: a regex's byte NFA
// determinized, ByteDfa, on demand or whole and bounded for a RegexConstraint; or a choice list's trie,
// choice_trie.hpp), the vocabulary's byte strings in a trie (TokenTrie, built once per
// run), and a Constraint (a regex's here; a grammar's in grammar_constraint.hpp) that gives, for a
// state, the tokens whose bytes keep the output a prefix of some string of the language (walking the
// trie with the automaton, so tokens sharing a prefix share the work; masks are cached per state) and
// whether the end of text (EOS) is allowed there (the output so far is complete).
// Not thread-safe: the engine computes a step's masks before sampling spreads over threads.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/base/constraint_spec.hpp"
#include "engine/constrain/regex_nfa.hpp"

namespace cbatch {

class Tokenizer;

// The bytes of masks a constraint keeps cached; past them its cache starts over.
inline constexpr size_t kMaxMaskCacheBytes = size_t{8} << 20;

// A deterministic automaton over bytes: states are ids from start(), kDead where nothing continues.
class ByteAutomaton {
 public:
  static constexpr int32_t kDead = -1;
  virtual ~ByteAutomaton() = default;
  virtual int32_t start() const = 0;
  virtual int32_t next(int32_t state, uint8_t byte) = 0;  // kDead when no string of the language continues that way
  virtual bool accepting(int32_t state) const = 0;
};

class ByteDfa final : public ByteAutomaton {
 public:
  explicit ByteDfa(Nfa nfa);
  int32_t start() const override { return 0; }
  int32_t next(int32_t state, uint8_t byte) override;
  bool accepting(int32_t state) const override { return accepting_[static_cast<size_t>(state)]; }
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

// The vocabulary's byte strings (each token as it decodes mid-text) as a trie laid out flat in
// depth-first order (the distinct prefixes sorted), so that a walk is one forward scan that jumps over
// the subtrees its automaton cannot enter. Tokens that decode to nothing (control tokens) are left out:
// a constraint never allows them.
class TokenTrie {
 public:
  explicit TokenTrie(const Tokenizer& tokenizer);
  int vocab_size() const { return vocab_size_; }
  const std::string& bytes(int32_t token) const { return bytes_[static_cast<size_t>(token)]; }

  // Node 0 is the root (the empty string); node i > 0 extends its parent (the last node before it of
  // depth depth(i) - 1) by byte(i).
  int32_t num_nodes() const { return static_cast<int32_t>(byte_.size()); }
  uint8_t byte(int32_t node) const { return byte_[static_cast<size_t>(node)]; }
  int32_t depth(int32_t node) const { return depth_[static_cast<size_t>(node)]; }
  int32_t subtree_end(int32_t node) const { return subtree_end_[static_cast<size_t>(node)]; }
  int32_t max_depth() const { return max_depth_; }
  // How many masks (one bit a token) fit in kMaxMaskCacheBytes.
  size_t max_cached_masks() const { return std::max<size_t>(16, kMaxMaskCacheBytes / ((static_cast<size_t>(vocab_size_) + 63) / 64 * 8)); }
  // The tokens whose bytes end at `node`.
  const int32_t* tokens_begin(int32_t node) const { return tokens_.data() + token_start_[static_cast<size_t>(node)]; }
  const int32_t* tokens_end(int32_t node) const { return tokens_.data() + token_start_[static_cast<size_t>(node) + 1]; }
  // Sets the bits of node's tokens in `mask` ((vocab + 63) / 64 words).
  void mark_tokens(int32_t node, std::vector<uint64_t>& mask) const {
    for (const int32_t* t = tokens_begin(node); t != tokens_end(node); ++t) mask[static_cast<size_t>(*t) / 64] |= uint64_t{1} << (*t % 64);
  }

 private:
  int vocab_size_ = 0;
  int32_t max_depth_ = 0;
  std::vector<std::string> bytes_;     // (vocab)
  std::vector<uint8_t> byte_;          // (node)
  std::vector<int32_t> depth_;         // (node)
  std::vector<int32_t> subtree_end_;   // (node) one past its last descendant
  std::vector<int32_t> token_start_;   // (node + 1) its tokens are tokens_[token_start_[i], token_start_[i + 1])
  std::vector<int32_t> tokens_;
};

// A regex whose whole DFA has more states is refused (its masks would take unbounded memory).
inline constexpr int kMaxDfaStates = 50000;

// A regex's whole DFA, as the engine compiles a `structured_outputs.regex` (compile_regex, then every
// state built): throws cbatch::Error where the pattern is refused or its DFA passes kMaxDfaStates.
std::unique_ptr<ByteDfa> compile_regex_dfa(std::string_view pattern);


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

// A regular language: the states are its byte automaton's (a regex's DFA, all built and counted up
// front, or a choice list's trie).
class RegexConstraint final : public Constraint {
 public:
  // Throws cbatch::Error when the DFA passes kMaxDfaStates.
  RegexConstraint(Nfa nfa, std::shared_ptr<const TokenTrie> trie);
  RegexConstraint(std::unique_ptr<ByteAutomaton> automaton, std::shared_ptr<const TokenTrie> trie);
  int32_t start() const override { return dfa_->start(); }
  int32_t advance(int32_t state, int32_t token) override;
  bool accepting(int32_t state) const override { return dfa_->accepting(state); }
  const std::vector<uint64_t>& allowed(int32_t state) override;

 private:
  std::unique_ptr<ByteAutomaton> dfa_;
  std::shared_ptr<const TokenTrie> trie_;
  std::unordered_map<int32_t, std::vector<uint64_t>> masks_;
};

}  // namespace cbatch
