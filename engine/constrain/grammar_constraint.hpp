// Token masks for a context-free grammar (grammar.hpp): a pushdown automaton run on sets of stacks.
//
// Design. A stack frame is (NFA position, parent frame), hash-consed in one table, so a stack is the id
// of its top frame and equal stacks are equal ids. A parse state is the sorted set of top frames whose
// position has byte edges (the "kernel"; calls, returns and epsilon edges are closed over eagerly) plus
// whether the root rule may end there. A byte moves every kernel frame along its matching edges, then
// closes: an epsilon edge keeps the parent, a call pushes (rule start, return frame), a rule's end pops to
// the parent frame (or, at the root with no parent, accepts); a call whose return position can only end
// the rule pushes nothing (the callee returns to the caller's parent), so right recursion (lists written
// `list ::= item ("," list)?`) keeps a flat stack. A token's mask comes from walking the
// vocabulary trie with the state (tokens sharing a prefix share the work); states reached by sequences
// are interned to ids, and each id's mask is cached (the cache starts over past kMaxMaskCacheBytes).
// Bounds for hostile grammars: stacks deeper than kMaxDepth frames, kernels of more than kMaxKernel
// stacks (ambiguity) and a frame table over kMaxFrames are paths not taken (the row may then end with
// finish_reason "length"); left recursion is refused when the grammar is compiled.
#pragma once
#include <map>
#include <unordered_map>

#include "engine/constrain/grammar.hpp"
#include "engine/constrain/token_automaton.hpp"

namespace cbatch {

class GrammarConstraint final : public Constraint {
 public:
  static constexpr int32_t kMaxDepth = 1000;
  static constexpr size_t kMaxKernel = 1024;
  static constexpr size_t kMaxFrames = size_t{1} << 18;  // about 180 bytes each with their memos

  GrammarConstraint(Grammar grammar, std::shared_ptr<const TokenTrie> trie);
  int32_t start() const override { return start_; }
  int32_t advance(int32_t state, int32_t token) override;
  bool accepting(int32_t state) const override { return states_[static_cast<size_t>(state)].accepting; }
  const std::vector<uint64_t>& allowed(int32_t state) override;
  int num_states() const { return static_cast<int>(states_.size()); }

 private:
  struct Frame {
    int32_t pos;     // NFA state
    int32_t parent;  // frame returned to when pos's rule ends; -1: none (the root's bottom)
    int32_t depth;   // frames below and this one
  };
  struct State {
    std::vector<int32_t> kernel;  // sorted frame ids
    bool accepting = false;
  };
  // What a frame leads to, filled on first use: the walks ask the same questions again and again.
  struct FrameMemo {
    std::vector<int32_t> next;    // (edge of pos) frame (edge's target, parent); kUnknown until asked
    std::vector<int32_t> kernel;  // its closure's kernel frames
    bool closed = false;          // kernel (and accepting) computed; an overflow leaves kernel empty
    bool accepting = false;
  };
  static constexpr int32_t kUnknown = -2;

  int32_t frame(int32_t pos, int32_t parent);  // -1 past kMaxFrames or kMaxDepth
  // Closes work_ (frame ids) into kernel frames appended to `out` (the kernel starts at `begin`); false
  // when it grows past kMaxKernel.
  bool close(std::vector<int32_t>& out, size_t begin, bool& accepting);
  const FrameMemo& closed(int32_t f);     // memo_[f] with its closure
  int32_t next_frame(int32_t f, size_t edge);
  // The kernel buf_[begin, end) after `byte`, appended to buf_; false when none continues (and not accepting).
  bool step(size_t begin, size_t end, uint8_t byte, bool& accepting);
  int32_t intern(size_t begin, bool accepting);  // buf_[begin, end()) as a State id; buf_ cut back to begin
  // The trie walk from the kernel in buf_ (all of it), marking the tokens that keep the parse alive.
  void walk(std::vector<uint64_t>& mask);

  Grammar g_;
  std::shared_ptr<const TokenTrie> trie_;
  std::vector<bool> is_end_;                            // (NFA state) some rule ends there
  std::vector<bool> is_tail_;                           // (NFA state) only epsilon edges to its rule's end follow
  std::vector<std::vector<int32_t>> closure_;           // (NFA state) states reached by epsilon edges, itself included
  std::vector<Frame> frames_;
  std::unordered_map<uint64_t, int32_t> frame_ids_;     // (pos, parent + 1) -> frame
  std::vector<FrameMemo> memo_;                         // (frame)
  std::vector<uint32_t> marks_;                         // (frame) generation of close()'s last visit
  uint32_t generation_ = 0;
  std::vector<uint32_t> seen_;                          // (frame) step()'s generation of its last union
  uint32_t seen_generation_ = 0;
  std::vector<State> states_;
  std::map<std::pair<std::vector<int32_t>, bool>, int32_t> state_ids_;
  std::unordered_map<int32_t, std::vector<uint64_t>> masks_;
  std::vector<int32_t> buf_;                            // kernels of the trie walk, as a stack
  std::vector<int32_t> work_;                           // scratch of close()
  int32_t start_ = 0;
};

}  // namespace cbatch
