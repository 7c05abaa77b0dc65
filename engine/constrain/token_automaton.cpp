// Subset construction on demand, the vocabulary trie, and the trie walk that makes a mask.
#include "engine/constrain/token_automaton.hpp"

#include <algorithm>

#include "engine/base/error.hpp"
#include "engine/text/tokenizer.hpp"

namespace cbatch {
namespace {

constexpr int32_t kUnknown = -2;

}  // namespace

ByteDfa::ByteDfa(Nfa nfa) : nfa_(std::move(nfa)) { state_of({nfa_.start}); }

void ByteDfa::close(std::vector<int32_t>& set) const {
  std::vector<bool> seen(nfa_.states.size(), false);
  for (int32_t s : set) seen[static_cast<size_t>(s)] = true;
  for (size_t i = 0; i < set.size(); ++i) {
    for (int32_t t : nfa_.states[static_cast<size_t>(set[i])].epsilon) {
      if (!seen[static_cast<size_t>(t)]) {
        seen[static_cast<size_t>(t)] = true;
        set.push_back(t);
      }
    }
  }
  std::sort(set.begin(), set.end());
}

int32_t ByteDfa::state_of(std::vector<int32_t> set) {
  close(set);
  const auto it = ids_.find(set);
  if (it != ids_.end()) return it->second;
  const auto id = static_cast<int32_t>(sets_.size());
  accepting_.push_back(std::binary_search(set.begin(), set.end(), nfa_.accept));
  ids_.emplace(set, id);
  sets_.push_back(std::move(set));
  std::array<int32_t, 256> row;
  row.fill(kUnknown);
  transitions_.push_back(row);
  return id;
}

int32_t ByteDfa::next(int32_t state, uint8_t byte) {
  int32_t& cached = transitions_[static_cast<size_t>(state)][byte];
  if (cached != kUnknown) return cached;
  std::vector<int32_t> targets;
  for (int32_t s : sets_[static_cast<size_t>(state)]) {
    for (const NfaEdge& e : nfa_.states[static_cast<size_t>(s)].edges) {
      if (byte >= e.lo && byte <= e.hi) targets.push_back(e.to);
    }
  }
  std::sort(targets.begin(), targets.end());
  targets.erase(std::unique(targets.begin(), targets.end()), targets.end());
  const int32_t result = targets.empty() ? kDead : state_of(std::move(targets));
  transitions_[static_cast<size_t>(state)][byte] = result;  // (state_of may have grown transitions_)
  return result;
}

void ByteDfa::build_all(int max_states) {
  std::array<bool, 257> cut{};  // cut[b]: a class starts at byte b
  cut[0] = true;
  for (const Nfa::State& st : nfa_.states) {
    for (const NfaEdge& e : st.edges) cut[e.lo] = cut[static_cast<size_t>(e.hi) + 1] = true;
  }
  for (int32_t s = 0; s < num_states(); ++s) {
    for (int b = 0; b < 256;) {
      int end = b + 1;
      while (end < 256 && !cut[static_cast<size_t>(end)]) ++end;
      const int32_t to = next(s, static_cast<uint8_t>(b));
      for (int c = b + 1; c < end; ++c) transitions_[static_cast<size_t>(s)][static_cast<size_t>(c)] = to;
      b = end;
    }
    if (num_states() > max_states) {
      throw Error("structured output: the regex's automaton grows past " + std::to_string(max_states) +
                  " states (a pattern like (a|b)*a(a|b){20} needs 2^21)");
    }
  }
}

TokenTrie::TokenTrie(const Tokenizer& tokenizer) : vocab_size_(tokenizer.vocab_size()) {
  bytes_.resize(static_cast<size_t>(vocab_size_));
  std::vector<int32_t> order;
  for (int32_t t = 0; t < vocab_size_; ++t) {
    bytes_[static_cast<size_t>(t)] = tokenizer.decode_piece(-1, t);
    if (!bytes_[static_cast<size_t>(t)].empty()) order.push_back(t);
  }
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return bytes_[static_cast<size_t>(a)] < bytes_[static_cast<size_t>(b)]; });
  byte_ = {0};
  depth_ = {0};
  subtree_end_ = {0};
  token_start_ = {0, 0};
  std::vector<int32_t> path = {0};  // the nodes of the previous string, by depth
  const std::string* previous = nullptr;
  for (int32_t t : order) {
    const std::string& b = bytes_[static_cast<size_t>(t)];
    size_t common = 0;
    if (previous) {
      while (common < b.size() && common < previous->size() && b[common] == (*previous)[common]) ++common;
    }
    for (size_t d = common + 1; d < path.size(); ++d) subtree_end_[static_cast<size_t>(path[d])] = num_nodes();
    path.resize(common + 1);
    for (size_t d = common; d < b.size(); ++d) {
      path.push_back(num_nodes());
      byte_.push_back(static_cast<uint8_t>(b[d]));
      depth_.push_back(static_cast<int32_t>(d + 1));
      subtree_end_.push_back(0);
      token_start_.push_back(token_start_.back());
    }
    tokens_.push_back(t);
    ++token_start_.back();
    max_depth_ = std::max(max_depth_, static_cast<int32_t>(b.size()));
    previous = &b;
  }
  for (int32_t node : path) subtree_end_[static_cast<size_t>(node)] = num_nodes();
}

namespace {

std::unique_ptr<ByteDfa> whole_dfa(Nfa nfa) {
  auto dfa = std::make_unique<ByteDfa>(std::move(nfa));
  dfa->build_all(kMaxDfaStates);
  return dfa;
}

}  // namespace

std::unique_ptr<ByteDfa> compile_regex_dfa(std::string_view pattern) { return whole_dfa(compile_regex(pattern)); }

RegexConstraint::RegexConstraint(Nfa nfa, std::shared_ptr<const TokenTrie> trie)
    : RegexConstraint(whole_dfa(std::move(nfa)), std::move(trie)) {}

RegexConstraint::RegexConstraint(std::unique_ptr<ByteAutomaton> automaton, std::shared_ptr<const TokenTrie> trie)
    : dfa_(std::move(automaton)), trie_(std::move(trie)) {}

int32_t RegexConstraint::advance(int32_t state, int32_t token) {
  for (unsigned char c : trie_->bytes(token)) {
    state = dfa_->next(state, c);
    if (state == ByteDfa::kDead) return state;
  }
  return state;
}

const std::vector<uint64_t>& RegexConstraint::allowed(int32_t state) {
  const auto it = masks_.find(state);
  if (it != masks_.end()) return it->second;
  if (masks_.size() >= trie_->max_cached_masks()) masks_.clear();
  std::vector<uint64_t> mask(static_cast<size_t>((trie_->vocab_size() + 63) / 64), 0);
  std::vector<int32_t> at_depth(static_cast<size_t>(trie_->max_depth()) + 1);  // DFA state after the node's prefix
  at_depth[0] = state;
  for (int32_t node = 1; node < trie_->num_nodes();) {
    const int32_t depth = trie_->depth(node);
    const int32_t next = dfa_->next(at_depth[static_cast<size_t>(depth - 1)], trie_->byte(node));
    if (next == ByteDfa::kDead) {
      node = trie_->subtree_end(node);
      continue;
    }
    at_depth[static_cast<size_t>(depth)] = next;
    trie_->mark_tokens(node, mask);
    ++node;
  }
  return masks_.emplace(state, std::move(mask)).first->second;
}

}  // namespace cbatch
