#include "engine/core/block_manager.hpp"

#include <cassert>

#include "engine/core/error.hpp"

namespace cbatch {

BlockManager::BlockManager(int num_blocks, int block_size) : num_blocks_(num_blocks), block_size_(block_size) {
  if (num_blocks <= 0) throw Error("the KV cache needs at least one block (got " + std::to_string(num_blocks) + ")");
  if (block_size <= 0) throw Error("--block-size must be positive (got " + std::to_string(block_size) + ")");
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

bool BlockManager::ensure_capacity(std::vector<int32_t>& table, int64_t num_tokens) {
  if (!can_ensure_capacity(table, num_tokens)) return false;
  const int target = blocks_for_tokens(num_tokens);
  while (static_cast<int>(table.size()) < target) {
    table.push_back(free_.back());
    free_.pop_back();
  }
  return true;
}

void BlockManager::release(std::vector<int32_t>& table) {
  for (auto it = table.rbegin(); it != table.rend(); ++it) free_.push_back(*it);
  table.clear();
  assert(num_free() <= num_blocks_);
}

}  // namespace cbatch
