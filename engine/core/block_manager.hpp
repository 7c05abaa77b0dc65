// The paged KV block manager: a fixed pool of blocks of `block_size` token slots, reference counts, and
// per-sequence block tables owned by the sequences; with prefix caching, also the content of full blocks.
//
// Prefix caching. A full, computed block is named by a 128-bit hash chained over its token ids and its
// parent block's hash (block i's hash covers tokens [0, (i + 1) * block_size)). Registered blocks stay
// cached after their last reference is released: they are free (counted in num_free()) but keep their K/V
// until a new block is needed and no uncached free block is left; then the least recently released one is
// evicted. A lookup walks a sequence's tokens block by block and stops at the first miss; a hit compares
// the block's token ids and its parent's hash as well, so a hash collision can only cost a miss, never give
// wrong K/V. Blocks a sequence holds are never evicted (only free blocks are).
// Invariant: every block is referenced (used), or free: uncached, or cached (evictable); at the end of a
// run num_free() == num_blocks().
#pragma once
#include <cstddef>
#include <cstdint>
#include <list>
#include <unordered_map>
#include <vector>

namespace cbatch {

struct BlockHash {
  uint64_t lo = 0;
  uint64_t hi = 0;
  bool operator==(const BlockHash&) const = default;
};

// The hash of the block holding tokens[0, block_size) after a block whose hash is `parent` ({} for the first).
BlockHash chain_block_hash(const BlockHash& parent, const int32_t* tokens, int block_size);
// The parent of a sequence's first block: {} for the base model, a hash of the LoRA adapter id otherwise, so
// K/V computed under one adapter are never found under another.
BlockHash root_block_hash(int lora_id);

class BlockManager {
 public:
  BlockManager(int num_blocks, int block_size, bool enable_caching = false);

  int block_size() const { return block_size_; }
  int num_blocks() const { return num_blocks_; }
  bool caching() const { return caching_; }
  int num_free() const { return static_cast<int>(free_.size() + evictable_.size()); }  // cached ones included
  int num_used() const { return num_blocks_ - num_free(); }
  int num_cached() const { return static_cast<int>(evictable_.size()); }  // free blocks with reusable K/V
  int blocks_for_tokens(int64_t num_tokens) const;

  // Grows `table` to hold num_tokens slots with new blocks (evicting cached ones when no other is free).
  // All-or-nothing: returns false and leaves the table as it was when too few blocks are free.
  bool ensure_capacity(std::vector<int32_t>& table, int64_t num_tokens);
  bool can_ensure_capacity(const std::vector<int32_t>& table, int64_t num_tokens) const;
  // Drops the table's reference to each of its blocks and empties it; hashes are cleared with it.
  void release(std::vector<int32_t>& table, std::vector<BlockHash>* hashes = nullptr);

  // Takes one more reference to each block of `table` (a sequence forked from its owner shares them).
  void share(const std::vector<int32_t>& table);
  int ref_count(int32_t block) const { return ref_count_[static_cast<size_t>(block)]; }
  // Copy-on-write: when the block that position `pos` falls in is shared, gives `table` a private block in
  // its place (appending {old, new} to `copies` when pos is not the block's first slot, so the K/V before
  // pos come along). Returns false, changing nothing, when no block is free.
  bool ensure_writable(std::vector<int32_t>& table, int pos, std::vector<int32_t>& copies);

  // Prefix caching (no-ops when off). `table` and `hashes` must be empty: appends the cached blocks of the
  // longest run of full blocks of tokens[0, max_tokens) and their hashes, takes a reference to each, and
  // returns the number of tokens they hold. `root`: the first block's parent (root_block_hash).
  int match_prefix(const std::vector<int32_t>& tokens, int max_tokens, std::vector<int32_t>& table,
                   std::vector<BlockHash>& hashes, const BlockHash& root = {});
  // Registers the full blocks of tokens[0, num_computed) that `hashes` does not cover yet (extends it), so
  // that later lookups find them. A block whose content another block already holds stays unregistered.
  void commit_full_blocks(const std::vector<int32_t>& tokens, int num_computed, const std::vector<int32_t>& table,
                          std::vector<BlockHash>& hashes, const BlockHash& root = {});

 private:
  struct Cached {
    BlockHash hash;
    BlockHash parent;
    std::vector<int32_t> tokens;  // (block_size) the block's token ids
  };
  int32_t take_free_block();
  void forget(int32_t block);

  int num_blocks_;
  int block_size_;
  bool caching_;
  std::vector<int32_t> ref_count_;                 // (num_blocks)
  std::vector<int32_t> free_;                      // uncached free blocks, the next to hand out at the back
  std::list<int32_t> evictable_;                   // cached free blocks, least recently released first
  std::vector<std::list<int32_t>::iterator> lru_position_;  // (num_blocks) valid while in evictable_
  std::vector<Cached> cached_;                     // (num_blocks) content of registered blocks
  std::vector<bool> is_registered_;                // (num_blocks)
  std::unordered_map<uint64_t, int32_t> by_hash_;  // hash.lo -> registered block
};

}  // namespace cbatch
