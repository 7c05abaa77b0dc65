// Block allocation with reference counts, per-group tables, windows sliding past old blocks, copy-on-write.
// The prefix cache's registry and lookups: block_cache.cpp.
#include "engine/core/block_manager.hpp"

#include <algorithm>
#include <cassert>
#include <string>

#include "engine/base/error.hpp"
#include "engine/model/kv_groups.hpp"

namespace cbatch {

int BlockTables::num_held() const {
  int n = 0;
  for (const std::vector<int32_t>& t : groups) n += static_cast<int>(std::count_if(t.begin(), t.end(), [](int32_t b) { return b >= 0; }));
  return n;
}

BlockManager::BlockManager(int num_blocks, int block_size, bool enable_caching, std::vector<int> group_windows)
    : num_blocks_(num_blocks), block_size_(block_size), caching_(enable_caching), windows_(std::move(group_windows)) {
  if (num_blocks <= 0) throw Error("the KV cache needs at least one block (got " + std::to_string(num_blocks) + ")");
  if (block_size <= 0) throw Error("--block-size must be positive (got " + std::to_string(block_size) + ")");
  if (windows_.empty()) throw Error("internal error: a KV block manager without KV groups");
  used_in_group_.assign(windows_.size(), 0);
  ref_count_.assign(static_cast<size_t>(num_blocks), 0);
  block_group_.assign(static_cast<size_t>(num_blocks), 0);
  lru_position_.resize(static_cast<size_t>(num_blocks));
  is_registered_.assign(static_cast<size_t>(num_blocks), false);
  by_hash_.resize(windows_.size());
  if (caching_) cached_.resize(static_cast<size_t>(num_blocks));
  free_.reserve(num_blocks);
  for (int b = num_blocks - 1; b >= 0; --b) free_.push_back(b);  // hand out block 0 first
}

int BlockManager::blocks_for_tokens(int64_t num_tokens) const {
  return static_cast<int>((num_tokens + block_size_ - 1) / block_size_);
}

int BlockManager::first_needed_block(int group, int64_t pos) const {
  const int w = window(group);
  return w > 0 && pos >= w ? static_cast<int>((pos - w + 1) / block_size_) : 0;
}

int64_t BlockManager::pages_for_request(int64_t num_tokens, int n, int64_t shared_tokens, bool sliding,
                                        int64_t chunk_tokens) const {
  const int64_t all = blocks_for_tokens(num_tokens);
  const int64_t own = all - shared_tokens / block_size_;
  int64_t pages = 0;
  for (int w : windows_) {
    pages += w > 0 && sliding ? n * std::min(all, window_span_blocks(w, block_size_, chunk_tokens)) : all + (n - 1) * own;
  }
  return pages;
}

void BlockManager::size_tables(BlockTables& tables) const {
  if (tables.groups.size() != windows_.size()) tables.groups.resize(windows_.size());
}

int BlockManager::blocks_needed(const BlockTables& tables, int64_t num_tokens) const {
  return std::max(0, blocks_for_tokens(num_tokens) - tables.num_blocks()) * num_groups();
}

bool BlockManager::can_ensure_capacity(const BlockTables& tables, int64_t num_tokens) const {
  return blocks_needed(tables, num_tokens) <= num_free();
}

// An uncached free block if there is one, else the least recently released cached one (its content is
// forgotten). The caller checked that some block is free.
int32_t BlockManager::take_free_block(int group) {
  int32_t block;
  if (!free_.empty()) {
    block = free_.back();
    free_.pop_back();
  } else {
    block = evictable_.front();
    evictable_.pop_front();
    forget(block);
  }
  ref_count_[static_cast<size_t>(block)] = 1;
  block_group_[static_cast<size_t>(block)] = group;
  ++used_in_group_[static_cast<size_t>(group)];
  return block;
}

void BlockManager::take_reference(int32_t block) {
  const size_t b = static_cast<size_t>(block);
  if (ref_count_[b]++ > 0) return;
  evictable_.erase(lru_position_[b]);
  ++used_in_group_[static_cast<size_t>(block_group_[b])];
}

void BlockManager::drop_reference(int32_t block) {
  const size_t b = static_cast<size_t>(block);
  assert(ref_count_[b] > 0);
  if (--ref_count_[b] > 0) return;
  --used_in_group_[static_cast<size_t>(block_group_[b])];
  if (is_registered_[b]) {
    lru_position_[b] = evictable_.insert(evictable_.end(), block);
  } else {
    free_.push_back(block);
  }
}

void BlockManager::forget(int32_t block) {
  const size_t b = static_cast<size_t>(block);
  if (!is_registered_[b]) return;
  by_hash_[static_cast<size_t>(block_group_[b])].erase(cached_[b].hash.lo);
  is_registered_[b] = false;
}

bool BlockManager::ensure_capacity(BlockTables& tables, int64_t num_tokens) {
  if (!can_ensure_capacity(tables, num_tokens)) return false;
  size_tables(tables);
  const size_t target = static_cast<size_t>(blocks_for_tokens(num_tokens));
  for (int g = 0; g < num_groups(); ++g) {
    std::vector<int32_t>& table = tables.groups[static_cast<size_t>(g)];
    while (table.size() < target) table.push_back(take_free_block(g));
  }
  return true;
}

int BlockManager::free_outside_window(BlockTables& tables, int64_t next_pos) {
  int freed = 0;
  for (int g = 0; g < num_groups() && !tables.empty(); ++g) {
    std::vector<int32_t>& table = tables.groups[static_cast<size_t>(g)];
    // The -1 entries are a prefix: walk back from the first block still read until one is freed already.
    for (int i = std::min(first_needed_block(g, next_pos), static_cast<int>(table.size())) - 1; i >= 0 && table[i] >= 0; --i) {
      drop_reference(table[static_cast<size_t>(i)]);
      table[static_cast<size_t>(i)] = -1;
      ++freed;
    }
  }
  return freed;
}

void BlockManager::release(BlockTables& tables, std::vector<BlockHash>* hashes) {
  // Last block first: with caching, a sequence's tail is evicted before its prefix (others share prefixes).
  for (std::vector<int32_t>& table : tables.groups) {
    for (auto it = table.rbegin(); it != table.rend(); ++it) {
      if (*it >= 0) drop_reference(*it);
    }
    table.clear();
  }
  if (hashes != nullptr) hashes->clear();
  assert(num_free() <= num_blocks_);
}

void BlockManager::share(const BlockTables& tables) {
  for (const std::vector<int32_t>& table : tables.groups) {
    for (int32_t b : table) {
      if (b < 0) continue;
      assert(ref_count_[static_cast<size_t>(b)] > 0);
      ++ref_count_[static_cast<size_t>(b)];
    }
  }
}

bool BlockManager::ensure_writable(BlockTables& tables, int pos, std::vector<int32_t>& copies) {
  const size_t index = static_cast<size_t>(pos / block_size_);
  auto is_shared = [&](const std::vector<int32_t>& t) {
    return index < t.size() && t[index] >= 0 && ref_count_[static_cast<size_t>(t[index])] > 1;
  };
  const int shared = static_cast<int>(std::count_if(tables.groups.begin(), tables.groups.end(), is_shared));
  if (shared == 0) return true;
  if (shared > num_free()) return false;
  for (int g = 0; g < num_groups(); ++g) {
    std::vector<int32_t>& table = tables.groups[static_cast<size_t>(g)];
    if (!is_shared(table)) continue;
    const int32_t old_block = table[index];
    const int32_t new_block = take_free_block(g);
    --ref_count_[static_cast<size_t>(old_block)];  // others still hold it: it stays in use
    if (pos % block_size_ != 0) {
      copies.push_back(old_block);
      copies.push_back(new_block);
    }
    table[index] = new_block;
  }
  return true;
}

}  // namespace cbatch
