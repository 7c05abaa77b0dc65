// A list of strings (a `choice` constraint, a JSON schema's top-level enum or const) as a deterministic
// byte trie: one state per distinct prefix (so at most the total length + 1), state 0 the empty prefix,
// accepting where some string ends. Built straight from the strings (no regex text, no NFA), so 100,000
// choices compile in a fraction of a second. Memory is linear: the edges are laid out flat, state s's
// edges at [edge_begin_[s], edge_begin_[s + 1]) sorted by byte (a step is a binary search), about 9
// bytes a state.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/constrain/token_automaton.hpp"

namespace cbatch {

class ChoiceTrie final : public ByteAutomaton {
 public:
  // Throws cbatch::Error for an empty list, or one too long for 32-bit state ids.
  explicit ChoiceTrie(std::vector<std::string> choices);
  int32_t start() const override { return 0; }
  int32_t next(int32_t state, uint8_t byte) override;
  bool accepting(int32_t state) const override { return accepting_[static_cast<size_t>(state)]; }
  int32_t num_states() const { return static_cast<int32_t>(accepting_.size()); }

 private:
  std::vector<int32_t> edge_begin_;  // (state + 1) its edges are [edge_begin_[s], edge_begin_[s + 1])
  std::vector<uint8_t> edge_byte_;   // (edge) sorted within a state
  std::vector<int32_t> edge_to_;     // (edge)
  std::vector<bool> accepting_;      // (state)
};

}  // namespace cbatch
