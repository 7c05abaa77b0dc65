// The pushdown automaton over hash-consed stacks (design note in grammar_constraint.hpp).
#include "engine/constrain/grammar_constraint.hpp"

#include <algorithm>

namespace cbatch {

GrammarConstraint::GrammarConstraint(Grammar grammar, std::shared_ptr<const TokenTrie> trie)
    : g_(std::move(grammar)), trie_(std::move(trie)) {
  const size_t n = g_.nfa.states.size();
  is_end_.assign(n, false);
  for (const Fragment& r : g_.rules) is_end_[static_cast<size_t>(r.end)] = true;
  closure_.resize(n);
  std::vector<uint32_t> seen(n, 0);
  for (size_t s = 0; s < n; ++s) {
    std::vector<int32_t>& c = closure_[s];
    c.push_back(static_cast<int32_t>(s));
    seen[s] = static_cast<uint32_t>(s + 1);
    for (size_t i = 0; i < c.size(); ++i) {
      for (int32_t t : g_.nfa.states[static_cast<size_t>(c[i])].epsilon) {
        if (seen[static_cast<size_t>(t)] == s + 1) continue;
        seen[static_cast<size_t>(t)] = static_cast<uint32_t>(s + 1);
        c.push_back(t);
      }
    }
  }
  is_tail_.assign(n, false);
  for (size_t s = 0; s < n; ++s) {
    bool tail = false;
    for (int32_t q : closure_[s]) {
      const Nfa::State& st = g_.nfa.states[static_cast<size_t>(q)];
      if (!st.edges.empty() || !st.calls.empty()) {
        tail = false;
        break;
      }
      tail = tail || is_end_[static_cast<size_t>(q)];
    }
    is_tail_[s] = tail;
  }
  work_ = {frame(g_.rules[static_cast<size_t>(g_.root)].start, -1)};
  bool accepting = false;
  close(buf_, 0, accepting);
  start_ = intern(0, accepting);
}

int32_t GrammarConstraint::frame(int32_t pos, int32_t parent) {
  const int32_t depth = parent < 0 ? 1 : frames_[static_cast<size_t>(parent)].depth + 1;
  if (depth > kMaxDepth) return -1;
  const uint64_t key = (static_cast<uint64_t>(pos) << 32) | static_cast<uint32_t>(parent + 1);
  const auto it = frame_ids_.find(key);
  if (it != frame_ids_.end()) return it->second;
  if (frames_.size() >= kMaxFrames) return -1;
  const auto id = static_cast<int32_t>(frames_.size());
  frames_.push_back({pos, parent, depth});
  memo_.emplace_back();
  marks_.push_back(0);
  seen_.push_back(0);
  frame_ids_.emplace(key, id);
  return id;
}

bool GrammarConstraint::close(std::vector<int32_t>& out, size_t begin, bool& accepting) {
  if (++generation_ == 0) {  // wrapped: old marks could collide
    std::fill(marks_.begin(), marks_.end(), 0);
    generation_ = 1;
  }
  while (!work_.empty()) {
    const int32_t f = work_.back();
    work_.pop_back();
    if (f < 0 || marks_[static_cast<size_t>(f)] == generation_) continue;
    marks_[static_cast<size_t>(f)] = generation_;
    const Frame fr = frames_[static_cast<size_t>(f)];  // a copy: frame() grows frames_
    for (int32_t q : closure_[static_cast<size_t>(fr.pos)]) {
      const int32_t id = q == fr.pos ? f : frame(q, fr.parent);
      if (id < 0) continue;
      if (id != f) {
        if (marks_[static_cast<size_t>(id)] == generation_) continue;
        marks_[static_cast<size_t>(id)] = generation_;
      }
      const Nfa::State& st = g_.nfa.states[static_cast<size_t>(q)];
      if (!st.edges.empty()) out.push_back(id);
      for (const NfaCall& c : st.calls) {
        // A call in tail position returns straight to the caller's parent: right recursion keeps a flat stack.
        const int32_t ret = is_tail_[static_cast<size_t>(c.to)] ? fr.parent : frame(c.to, fr.parent);
        if (ret >= 0 || is_tail_[static_cast<size_t>(c.to)]) work_.push_back(frame(g_.rules[static_cast<size_t>(c.rule)].start, ret));
      }
      if (is_end_[static_cast<size_t>(q)]) {
        if (fr.parent < 0) accepting = true;
        else work_.push_back(fr.parent);
      }
    }
    if (out.size() - begin > kMaxKernel) {
      work_.clear();
      return false;
    }
  }
  return true;
}

const GrammarConstraint::FrameMemo& GrammarConstraint::closed(int32_t f) {
  if (!memo_[static_cast<size_t>(f)].closed) {
    std::vector<int32_t> kernel;
    bool accepting = false;
    work_ = {f};
    if (!close(kernel, 0, accepting)) kernel.clear(), accepting = false;
    FrameMemo& m = memo_[static_cast<size_t>(f)];  // (close() may have grown memo_)
    m.kernel = std::move(kernel);
    m.accepting = accepting;
    m.closed = true;
  }
  return memo_[static_cast<size_t>(f)];
}

int32_t GrammarConstraint::next_frame(int32_t f, size_t edge) {
  const Frame fr = frames_[static_cast<size_t>(f)];
  std::vector<int32_t>& next = memo_[static_cast<size_t>(f)].next;
  if (next.empty()) next.assign(g_.nfa.states[static_cast<size_t>(fr.pos)].edges.size(), kUnknown);
  if (next[edge] == kUnknown) {
    const int32_t to = frame(g_.nfa.states[static_cast<size_t>(fr.pos)].edges[edge].to, fr.parent);
    memo_[static_cast<size_t>(f)].next[edge] = to;  // (frame() may have grown memo_)
  }
  return memo_[static_cast<size_t>(f)].next[edge];
}

// The union of the memoized closures of every frame the byte leads to.
bool GrammarConstraint::step(size_t begin, size_t end, uint8_t byte, bool& accepting) {
  if (++seen_generation_ == 0) {
    std::fill(seen_.begin(), seen_.end(), 0);
    seen_generation_ = 1;
  }
  const size_t out = buf_.size();
  accepting = false;
  for (size_t i = begin; i < end; ++i) {
    const int32_t f = buf_[i];
    const std::vector<NfaEdge>& edges = g_.nfa.states[static_cast<size_t>(frames_[static_cast<size_t>(f)].pos)].edges;
    for (size_t k = 0; k < edges.size(); ++k) {
      if (byte < edges[k].lo || byte > edges[k].hi) continue;
      const int32_t to = next_frame(f, k);
      if (to < 0) continue;
      const FrameMemo& m = closed(to);
      accepting = accepting || m.accepting;
      for (int32_t id : m.kernel) {
        if (seen_[static_cast<size_t>(id)] == seen_generation_) continue;
        seen_[static_cast<size_t>(id)] = seen_generation_;
        buf_.push_back(id);
      }
    }
  }
  if (buf_.size() - out > kMaxKernel) {
    buf_.resize(out);
    accepting = false;
    return false;
  }
  return buf_.size() > out || accepting;
}

int32_t GrammarConstraint::intern(size_t begin, bool accepting) {
  std::vector<int32_t> kernel(buf_.begin() + static_cast<std::ptrdiff_t>(begin), buf_.end());
  buf_.resize(begin);
  std::sort(kernel.begin(), kernel.end());
  auto key = std::make_pair(std::move(kernel), accepting);
  const auto it = state_ids_.find(key);
  if (it != state_ids_.end()) return it->second;
  const auto id = static_cast<int32_t>(states_.size());
  states_.push_back({key.first, accepting});
  state_ids_.emplace(std::move(key), id);
  return id;
}

int32_t GrammarConstraint::advance(int32_t state, int32_t token) {
  const State& s = states_[static_cast<size_t>(state)];
  buf_.assign(s.kernel.begin(), s.kernel.end());
  bool accepting = s.accepting;
  size_t begin = 0;
  for (unsigned char c : trie_->bytes(token)) {
    const size_t end = buf_.size();
    if (!step(begin, end, c, accepting)) return ByteDfa::kDead;
    begin = end;
  }
  return intern(begin, accepting);
}

void GrammarConstraint::walk(std::vector<uint64_t>& mask) {
  std::vector<size_t> ends(static_cast<size_t>(trie_->max_depth()) + 1);  // (depth) end of its kernel in buf_
  ends[0] = buf_.size();
  for (int32_t node = 1; node < trie_->num_nodes();) {
    const auto depth = static_cast<size_t>(trie_->depth(node));
    const size_t begin = depth == 1 ? 0 : ends[depth - 2];  // the parent's kernel: buf_[begin, ends[depth - 1])
    buf_.resize(ends[depth - 1]);
    bool accepting = false;
    if (!step(begin, ends[depth - 1], trie_->byte(node), accepting)) {
      node = trie_->subtree_end(node);
      continue;
    }
    trie_->mark_tokens(node, mask);
    ends[depth] = buf_.size();
    node = ends[depth] > ends[depth - 1] ? node + 1 : trie_->subtree_end(node);  // accepting only: nothing follows
  }
}

const std::vector<uint64_t>& GrammarConstraint::allowed(int32_t state) {
  const auto it = masks_.find(state);
  if (it != masks_.end()) return it->second;
  if (masks_.size() >= trie_->max_cached_masks()) masks_.clear();
  std::vector<uint64_t> mask(static_cast<size_t>((trie_->vocab_size() + 63) / 64), 0);
  const State& s = states_[static_cast<size_t>(state)];
  buf_.assign(s.kernel.begin(), s.kernel.end());
  walk(mask);
  return masks_.emplace(state, std::move(mask)).first->second;
}

}  // namespace cbatch
