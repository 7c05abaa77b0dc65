// Block allocation with reference counts, and the prefix cache's registry and LRU eviction.
#include "engine/core/block_manager.hpp"

#include <algorithm>
#include <cassert>

#include "engine/base/error.hpp"

namespace cbatch {
namespace {

uint64_t mix64(uint64_t x) {  // splitmix64's finalizer
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

BlockHash chain_block_hash(const BlockHash& parent, const int32_t* tokens, int block_size) {
  // Two independent 64-bit lanes (different seeds and multipliers): a 128-bit name for the whole prefix.
  uint64_t lo = mix64(parent.lo ^ 0x9e3779b97f4a7c15ULL);
  uint64_t hi = mix64(parent.hi + 0x632be59bd9b4e019ULL);
  for (int i = 0; i < block_size; ++i) {
    const uint64_t t = static_cast<uint32_t>(tokens[i]);
    lo = mix64(lo + t * 0xd6e8feb86659fd93ULL);
    hi = mix64(hi ^ (t + 0xa0761d6478bd642fULL));
  }
  return {lo, hi};
}

BlockManager::BlockManager(int num_blocks, int block_size, bool enable_caching)
    : num_blocks_(num_blocks), block_size_(block_size), caching_(enable_caching) {
  if (num_blocks <= 0) throw Error("the KV cache needs at least one block (got " + std::to_string(num_blocks) + ")");
  if (block_size <= 0) throw Error("--block-size must be positive (got " + std::to_string(block_size) + ")");
  ref_count_.assign(static_cast<size_t>(num_blocks), 0);
  lru_position_.resize(static_cast<size_t>(num_blocks));
  is_registered_.assign(static_cast<size_t>(num_blocks), false);
  if (caching_) cached_.resize(static_cast<size_t>(num_blocks));
  free_.reserve(num_blocks);
  for (int b = num_blocks - 1; b >= 0; --b) free_.push_back(b);  // hand out block 0 first
}

int BlockManager::blocks_for_tokens(int64_t num_tokens) const {
  return static_cast<int>((num_tokens + block_size_ - 1) / block_size_);
}

bool BlockManager::can_ensure_capacity(const std::vector<int32_t>& table, int64_t num_tokens) const {
  const int needed = blocks_for_tokens(num_tokens) - static_cast<int>(table.size());
  return needed <= num_free();
}

// An uncached free block if there is one, else the least recently released cached one (its content is
// forgotten). The caller checked that some block is free.
int32_t BlockManager::take_free_block() {
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
  return block;
}

void BlockManager::forget(int32_t block) {
  if (!is_registered_[static_cast<size_t>(block)]) return;
  by_hash_.erase(cached_[static_cast<size_t>(block)].hash.lo);
  is_registered_[static_cast<size_t>(block)] = false;
}

bool BlockManager::ensure_capacity(std::vector<int32_t>& table, int64_t num_tokens) {
  if (!can_ensure_capacity(table, num_tokens)) return false;
  const int target = blocks_for_tokens(num_tokens);
  while (static_cast<int>(table.size()) < target) table.push_back(take_free_block());
  return true;
}

void BlockManager::release(std::vector<int32_t>& table, std::vector<BlockHash>* hashes) {
  // Last block first: with caching, a sequence's tail is evicted before its prefix (others share prefixes).
  for (auto it = table.rbegin(); it != table.rend(); ++it) {
    const size_t b = static_cast<size_t>(*it);
    assert(ref_count_[b] > 0);
    if (--ref_count_[b] > 0) continue;
    if (is_registered_[b]) {
      lru_position_[b] = evictable_.insert(evictable_.end(), *it);
    } else {
      free_.push_back(*it);
    }
  }
  table.clear();
  if (hashes != nullptr) hashes->clear();
  assert(num_free() <= num_blocks_);
}

void BlockManager::share(const std::vector<int32_t>& table) {
  for (int32_t b : table) {
    assert(ref_count_[static_cast<size_t>(b)] > 0);
    ++ref_count_[static_cast<size_t>(b)];
  }
}

bool BlockManager::ensure_writable(std::vector<int32_t>& table, int pos, std::vector<int32_t>& copies) {
  const size_t index = static_cast<size_t>(pos / block_size_);
  if (index >= table.size() || ref_count_[static_cast<size_t>(table[index])] == 1) return true;
  if (num_free() == 0) return false;
  const int32_t old_block = table[index];
  const int32_t new_block = take_free_block();
  --ref_count_[static_cast<size_t>(old_block)];  // others still hold it: it stays in use
  if (pos % block_size_ != 0) {
    copies.push_back(old_block);
    copies.push_back(new_block);
  }
  table[index] = new_block;
  return true;
}

BlockHash root_block_hash(int lora_id) {
  if (lora_id == 0) return {};
  const int32_t id = lora_id;
  return chain_block_hash(BlockHash{0x4c6f5241ULL, 0x41646170ULL}, &id, 1);  // "LoRA", "Adap"
}

int BlockManager::match_prefix(const std::vector<int32_t>& tokens, int max_tokens, std::vector<int32_t>& table,
                               std::vector<BlockHash>& hashes, const BlockHash& root) {
  assert(table.empty() && hashes.empty());
  if (!caching_) return 0;
  BlockHash parent = root;
  const int num_full = std::min<int>(max_tokens, static_cast<int>(tokens.size())) / block_size_;
  for (int i = 0; i < num_full; ++i) {
    const int32_t* block_tokens = tokens.data() + static_cast<size_t>(i) * block_size_;
    const BlockHash hash = chain_block_hash(parent, block_tokens, block_size_);
    const auto it = by_hash_.find(hash.lo);
    if (it == by_hash_.end()) break;
    const size_t b = static_cast<size_t>(it->second);
    const Cached& c = cached_[b];
    if (!(c.hash == hash) || !(c.parent == parent) || !std::equal(c.tokens.begin(), c.tokens.end(), block_tokens)) break;
    if (ref_count_[b]++ == 0) evictable_.erase(lru_position_[b]);
    table.push_back(it->second);
    hashes.push_back(hash);
    parent = hash;
  }
  return static_cast<int>(table.size()) * block_size_;
}

void BlockManager::commit_full_blocks(const std::vector<int32_t>& tokens, int num_computed,
                                      const std::vector<int32_t>& table, std::vector<BlockHash>& hashes,
                                      const BlockHash& root) {
  if (!caching_) return;
  const int num_full = num_computed / block_size_;
  for (int i = static_cast<int>(hashes.size()); i < num_full; ++i) {
    const BlockHash parent = i > 0 ? hashes[static_cast<size_t>(i - 1)] : root;
    const int32_t* block_tokens = tokens.data() + static_cast<size_t>(i) * block_size_;
    const BlockHash hash = chain_block_hash(parent, block_tokens, block_size_);
    hashes.push_back(hash);
    const size_t b = static_cast<size_t>(table[static_cast<size_t>(i)]);
    if (is_registered_[b] || by_hash_.count(hash.lo) != 0) continue;  // shared already, or a twin holds it
    cached_[b] = Cached{hash, parent, std::vector<int32_t>(block_tokens, block_tokens + block_size_)};
    is_registered_[b] = true;
    by_hash_.emplace(hash.lo, static_cast<int32_t>(b));
  }
}

}  // namespace cbatch
