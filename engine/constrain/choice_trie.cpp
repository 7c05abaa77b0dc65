// The trie built from the sorted strings: each string adds the states past its common prefix with the
// one before it, so states come in depth-first order and a state's children in byte order; the flat
// edge table is then filled state by state.
#include "engine/constrain/choice_trie.hpp"

#include <algorithm>
#include <limits>

#include "engine/base/error.hpp"

namespace cbatch {

ChoiceTrie::ChoiceTrie(std::vector<std::string> choices) {
  if (choices.empty()) throw Error("an empty choice list (it accepts nothing)");
  size_t total_bytes = 0;
  for (const std::string& c : choices) total_bytes += c.size();
  if (total_bytes >= static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    throw Error("a choice list of " + std::to_string(total_bytes) + " bytes (at most 2^31 - 1)");
  }
  std::sort(choices.begin(), choices.end());  // bytewise (char_traits<char> compares as unsigned char)
  std::vector<int32_t> parent = {-1};         // (state) temporary
  std::vector<uint8_t> byte = {0};            // (state) the byte of the edge into it; temporary
  accepting_ = {false};
  std::vector<int32_t> path = {0};  // the states of the previous string's prefixes, by length
  const std::string* previous = nullptr;
  for (const std::string& c : choices) {
    size_t common = 0;
    if (previous) {
      const size_t n = std::min(c.size(), previous->size());
      while (common < n && c[common] == (*previous)[common]) ++common;
    }
    path.resize(common + 1);
    for (size_t d = common; d < c.size(); ++d) {
      parent.push_back(path.back());
      byte.push_back(static_cast<uint8_t>(c[d]));
      accepting_.push_back(false);
      path.push_back(static_cast<int32_t>(parent.size() - 1));
    }
    accepting_[static_cast<size_t>(path.back())] = true;
    previous = &c;
  }
  const size_t n = parent.size();
  edge_begin_.assign(n + 1, 0);
  for (size_t s = 1; s < n; ++s) ++edge_begin_[static_cast<size_t>(parent[s]) + 1];
  for (size_t s = 0; s < n; ++s) edge_begin_[s + 1] += edge_begin_[s];
  edge_byte_.resize(n - 1);
  edge_to_.resize(n - 1);
  std::vector<int32_t> fill(edge_begin_.begin(), edge_begin_.end() - 1);  // (state) its next free edge
  for (size_t s = 1; s < n; ++s) {
    const auto e = static_cast<size_t>(fill[static_cast<size_t>(parent[s])]++);
    edge_byte_[e] = byte[s];
    edge_to_[e] = static_cast<int32_t>(s);
  }
}

int32_t ChoiceTrie::next(int32_t state, uint8_t byte) {
  const auto begin = edge_byte_.begin() + edge_begin_[static_cast<size_t>(state)];
  const auto end = edge_byte_.begin() + edge_begin_[static_cast<size_t>(state) + 1];
  const auto it = std::lower_bound(begin, end, byte);
  if (it == end || *it != byte) return kDead;
  return edge_to_[static_cast<size_t>(it - edge_byte_.begin())];
}

}  // namespace cbatch
