// The recurrent-state snapshot pool (state_snapshots.hpp).
#include "engine/core/state_snapshots.hpp"

#include <algorithm>
#include <string>

#include "engine/base/error.hpp"

namespace cbatch {

int64_t default_snapshot_share(int64_t fit) { return std::min<int64_t>(fit / 4, fit - 1); }

int snapshots_beside(int running) { return (running + 2) / 3; }

StateSnapshots::StateSnapshots(int num_snapshots, int first_slot)
    : num_snapshots_(num_snapshots), first_slot_(first_slot) {
  if (num_snapshots < 0) {
    throw Error("the state snapshot pool needs a non-negative size (got " + std::to_string(num_snapshots) + ")");
  }
  lru_pos_.resize(static_cast<size_t>(num_snapshots));
  hash_.resize(static_cast<size_t>(num_snapshots));
  pins_.assign(static_cast<size_t>(num_snapshots), 0);
  for (int s = num_snapshots - 1; s >= 0; --s) free_.push_back(s);  // hand out snapshot 0 first
}

int StateSnapshots::num_pinned() const {
  int n = 0;
  for (const int32_t p : pins_) n += p > 0;
  return n;
}

int32_t StateSnapshots::find(const BlockHash& hash) const {
  const auto it = by_hash_.find(hash.lo);
  if (it == by_hash_.end() || !(hash_[static_cast<size_t>(it->second)] == hash)) return -1;
  return it->second;
}

void StateSnapshots::touch(int32_t snapshot) {
  lru_.splice(lru_.end(), lru_, lru_pos_[static_cast<size_t>(snapshot)]);
}

int32_t StateSnapshots::capture(const BlockHash& hash, const std::function<bool(const BlockHash&)>& is_cached) {
  if (by_hash_.count(hash.lo) != 0) return -1;  // saved already (or a 64-bit twin: keep the one there)
  int32_t s = -1;
  if (!free_.empty()) {
    s = free_.back();
    free_.pop_back();
  } else {
    for (const int32_t victim : lru_) {
      if (pins_[static_cast<size_t>(victim)] != 0) continue;
      if (s < 0) s = victim;  // the least recently used
      if (is_cached && !is_cached(hash_[static_cast<size_t>(victim)])) {
        s = victim;  // its blocks are gone: no hit can use it
        break;
      }
    }
    if (s < 0) return -1;
    by_hash_.erase(hash_[static_cast<size_t>(s)].lo);
    lru_.erase(lru_pos_[static_cast<size_t>(s)]);
    ++num_evictions_;
  }
  hash_[static_cast<size_t>(s)] = hash;
  by_hash_.emplace(hash.lo, s);
  lru_pos_[static_cast<size_t>(s)] = lru_.insert(lru_.end(), s);
  ++num_saved_;
  return s;
}

void StateSnapshots::pin(int32_t snapshot) {
  if (snapshot < 0 || snapshot >= num_snapshots_ || find(hash_[static_cast<size_t>(snapshot)]) != snapshot) {
    throw Error("internal error: state snapshot " + std::to_string(snapshot) + " pinned but not registered");
  }
  ++pins_[static_cast<size_t>(snapshot)];
  touch(snapshot);
}

void StateSnapshots::unpin(int32_t snapshot) {
  if (snapshot < 0 || snapshot >= num_snapshots_ || pins_[static_cast<size_t>(snapshot)] == 0) {
    throw Error("internal error: state snapshot " + std::to_string(snapshot) + " unpinned but not pinned");
  }
  --pins_[static_cast<size_t>(snapshot)];
}

}  // namespace cbatch
