// The prefix cache of the block manager (block_manager.hpp): block names, the per-group registry, lookups
// of a hit across full and windowed groups, and registration of computed blocks.
#include <algorithm>
#include <cassert>

#include "engine/core/block_manager.hpp"

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

BlockHash root_block_hash(int lora_id) {
  if (lora_id == 0) return {};
  const int32_t id = lora_id;
  return chain_block_hash(BlockHash{0x4c6f5241ULL, 0x41646170ULL}, &id, 1);  // "LoRA", "Adap"
}

int32_t BlockManager::find_cached(int group, const BlockHash& hash, const BlockHash& parent, const int32_t* tokens) const {
  const auto& registry = by_hash_[static_cast<size_t>(group)];
  const auto it = registry.find(hash.lo);
  if (it == registry.end()) return -1;
  const Cached& c = cached_[static_cast<size_t>(it->second)];
  if (!(c.hash == hash) || !(c.parent == parent) || !std::equal(c.tokens.begin(), c.tokens.end(), tokens)) return -1;
  return it->second;
}

// The first position whose window a hit of k blocks must serve: k * block_size, the first computed, and the
// one before it (a static batch's padding rows repeat it while the others compute the columns before).
int64_t BlockManager::first_served_position(int k) const { return std::max<int64_t>(0, int64_t{k} * block_size_ - 1); }

// Whether every windowed group holds the blocks its window reads from first_served_position(k) on.
bool BlockManager::window_hit(int k, const std::vector<BlockHash>& chain, const BlockHash& root,
                              const int32_t* tokens) const {
  for (int g = 0; g < num_groups(); ++g) {
    if (window(g) == 0) continue;
    for (int i = k - 1; i >= first_needed_block(g, first_served_position(k)); --i) {
      const BlockHash& parent = i > 0 ? chain[static_cast<size_t>(i - 1)] : root;
      if (find_cached(g, chain[static_cast<size_t>(i)], parent, tokens + static_cast<size_t>(i) * block_size_) < 0) return false;
    }
  }
  return true;
}

int BlockManager::match_prefix(const std::vector<int32_t>& tokens, int max_tokens, BlockTables& tables,
                               std::vector<BlockHash>& hashes, const BlockHash& root) {
  assert(tables.empty() && hashes.empty());
  if (!caching_) return 0;
  // The chain of names as far as every full group holds the blocks.
  std::vector<BlockHash> chain;
  BlockHash parent = root;
  const int num_full = std::min<int>(max_tokens, static_cast<int>(tokens.size())) / block_size_;
  for (int i = 0; i < num_full; ++i) {
    const int32_t* block_tokens = tokens.data() + static_cast<size_t>(i) * block_size_;
    const BlockHash hash = chain_block_hash(parent, block_tokens, block_size_);
    bool held = true;
    for (int g = 0; g < num_groups() && held; ++g) held = window(g) > 0 || find_cached(g, hash, parent, block_tokens) >= 0;
    if (!held) break;
    chain.push_back(hash);
    parent = hash;
  }
  // The longest of those prefixes whose window blocks every windowed group holds as well.
  int k = static_cast<int>(chain.size());
  while (k > 0 && !window_hit(k, chain, root, tokens.data())) --k;
  if (k == 0) return 0;
  size_tables(tables);
  for (int g = 0; g < num_groups(); ++g) {
    std::vector<int32_t>& table = tables.groups[static_cast<size_t>(g)];
    table.assign(static_cast<size_t>(k), -1);
    for (int i = first_needed_block(g, first_served_position(k)); i < k; ++i) {
      const BlockHash& p = i > 0 ? chain[static_cast<size_t>(i - 1)] : root;
      const int32_t b = find_cached(g, chain[static_cast<size_t>(i)], p, tokens.data() + static_cast<size_t>(i) * block_size_);
      assert(b >= 0);
      take_reference(b);
      table[static_cast<size_t>(i)] = b;
    }
  }
  hashes.assign(chain.begin(), chain.begin() + k);
  return k * block_size_;
}

bool BlockManager::holds_block(const BlockHash& hash) const {
  for (int g = 0; g < num_groups(); ++g) {
    if (window(g) > 0) continue;
    const auto& registry = by_hash_[static_cast<size_t>(g)];
    const auto it = registry.find(hash.lo);
    if (it == registry.end() || !(cached_[static_cast<size_t>(it->second)].hash == hash)) return false;
  }
  return true;
}

void BlockManager::commit_full_blocks(const std::vector<int32_t>& tokens, int num_computed, const BlockTables& tables,
                                      std::vector<BlockHash>& hashes, const BlockHash& root) {
  if (!caching_) return;
  const int num_full = std::min(num_computed / block_size_, tables.num_blocks());
  for (int i = static_cast<int>(hashes.size()); i < num_full; ++i) {
    const BlockHash parent = i > 0 ? hashes[static_cast<size_t>(i - 1)] : root;
    const int32_t* block_tokens = tokens.data() + static_cast<size_t>(i) * block_size_;
    const BlockHash hash = chain_block_hash(parent, block_tokens, block_size_);
    hashes.push_back(hash);
    for (int g = 0; g < num_groups(); ++g) {
      const int32_t block = tables.groups[static_cast<size_t>(g)][static_cast<size_t>(i)];
      if (block < 0) continue;  // slid out of the window before it was registered
      const size_t b = static_cast<size_t>(block);
      auto& registry = by_hash_[static_cast<size_t>(g)];
      if (is_registered_[b] || registry.count(hash.lo) != 0) continue;  // shared already, or a twin holds it
      cached_[b] = Cached{hash, parent, std::vector<int32_t>(block_tokens, block_tokens + block_size_)};
      is_registered_[b] = true;
      registry.emplace(hash.lo, block);
    }
  }
}

}  // namespace cbatch
