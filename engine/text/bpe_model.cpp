// BPE merges over a linked list of symbols with a min-heap of candidate pairs keyed by (rank, left
// position), as tokenizers' Word::merge_all: a popped pair is skipped when the pair at its position no
// longer merges into the token it was queued for.
#include "engine/text/bpe_model.hpp"

#include <cstdio>
#include <queue>

#include "engine/base/elide.hpp"
#include "engine/base/error.hpp"
#include "engine/text/utf8.hpp"

namespace cbatch {
namespace {

uint64_t pair_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

struct Candidate {
  int32_t rank;
  int left;  // symbol index
  int32_t merged_id;
};

struct LaterCandidate {  // std::priority_queue pops the largest: make that the lowest rank, leftmost
  bool operator()(const Candidate& a, const Candidate& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

}  // namespace

struct BpeModel::Symbol {
  int32_t id;
  int prev;
  int next;
  bool alive;
};

bool split_merge(std::string_view merge, std::pair<std::string, std::string>* out) {
  const size_t space = merge.find(' ', 1);
  if (space == std::string_view::npos) return false;
  *out = {std::string(merge.substr(0, space)), std::string(merge.substr(space + 1))};
  return true;
}

BpeModel::BpeModel(const std::vector<std::string>& tokens,
                   const std::vector<std::pair<std::string, std::string>>& merges, const BpeModelOptions& options,
                   const std::string& source)
    : options_(options) {
  ids_.reserve(tokens.size());
  for (size_t id = 0; id < tokens.size(); ++id) ids_.emplace(tokens[id], static_cast<int32_t>(id));
  merges_.reserve(merges.size());
  std::string joined;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [left, right] = merges[rank];
    joined.assign(left).append(right);
    const int32_t l = find(left), r = find(right), m = find(joined);
    if (l < 0 || r < 0 || m < 0) {
      throw Error("'" + source + "': merge " + std::to_string(rank) + " ('" + elide(left) + " " + elide(right) +
                  "') refers to a token that is not in the vocabulary");
    }
    merges_.emplace(pair_key(l, r), std::make_pair(static_cast<int32_t>(rank), m));  // first rank wins
  }
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    byte_ids_[b] = find(name);
  }
}

int32_t BpeModel::find(std::string_view text) const {
  auto it = ids_.find(text);
  return it == ids_.end() ? -1 : it->second;
}

std::vector<BpeModel::Symbol> BpeModel::initial_symbols(std::string_view word) const {
  std::vector<Symbol> symbols;
  auto push = [&](int32_t id) {
    const int index = static_cast<int>(symbols.size());
    symbols.push_back({id, index - 1, -1, true});
    if (index > 0) symbols[index - 1].next = index;
  };
  bool last_unknown = false;
  for (size_t pos = 0; pos < word.size();) {
    const size_t length = next_utf8_sequence(word, pos).length;
    const std::string_view ch = word.substr(pos, length);
    pos += length;
    if (const int32_t id = find(ch); id >= 0) {
      push(id);
      last_unknown = false;
      continue;
    }
    bool bytes_ok = options_.byte_fallback;
    for (char c : ch) bytes_ok = bytes_ok && byte_ids_[static_cast<uint8_t>(c)] >= 0;
    if (bytes_ok) {
      for (char c : ch) push(byte_ids_[static_cast<uint8_t>(c)]);
      last_unknown = false;
    } else if (options_.unk_id >= 0 && !(options_.fuse_unk && last_unknown)) {
      push(options_.unk_id);
      last_unknown = true;
    }
  }
  return symbols;
}

void BpeModel::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (options_.ignore_merges) {
    if (const int32_t id = find(word); id >= 0) {
      out.push_back(id);
      return;
    }
  }
  std::vector<Symbol> symbols = initial_symbols(word);
  std::priority_queue<Candidate, std::vector<Candidate>, LaterCandidate> queue;
  auto try_pair = [&](int left) {
    if (left < 0 || symbols[left].next < 0) return;
    const int32_t l = symbols[left].id, r = symbols[symbols[left].next].id;
    auto it = merges_.find(pair_key(l, r));
    if (it != merges_.end()) queue.push({it->second.first, left, it->second.second});
  };
  for (int i = 0; i + 1 < static_cast<int>(symbols.size()); ++i) try_pair(i);
  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    Symbol& left = symbols[c.left];
    if (!left.alive || left.next < 0) continue;
    Symbol& right = symbols[left.next];
    // Stale unless the pair there now merges into the same token (tokenizers compares only that).
    auto now = merges_.find(pair_key(left.id, right.id));
    if (now == merges_.end() || now->second.second != c.merged_id) continue;
    left.id = c.merged_id;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = c.left;
    try_pair(left.prev);
    try_pair(c.left);
  }
  for (int i = symbols.empty() ? -1 : 0; i >= 0; i = symbols[i].next) out.push_back(symbols[i].id);
}

}  // namespace cbatch
