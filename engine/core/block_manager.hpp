// The paged KV block manager: one pool of equal pages (blocks) of `block_size` token slots, reference counts,
// and per-sequence block tables, one per KV group (kv_groups.hpp), owned by the sequences; with prefix
// caching, also the content of full blocks. A page belongs to one group while used: it holds the K/V of that
// group's layers. A windowed group's table keeps only the blocks that meet its window: free_outside_window()
// gives older ones back (their entries become -1, never read again) as a sequence moves on.
//
// Prefix caching. A full, computed block is named by a 128-bit hash chained over its token ids and its
// parent block's hash (block i's hash covers tokens [0, (i + 1) * block_size)); each group registers its own
// page under that name. Registered blocks stay cached after their last reference is released (a windowed
// group's slid-out blocks too): they are free (counted in num_free()) but keep their K/V until a new block
// is needed and no uncached free block is left; then the least recently released one is evicted. A hit of
// k blocks needs, in every full group, blocks 0..k-1 and, in every windowed group, the blocks its window
// reads from position k * block_size - 1 on (the last cached one: a static batch's padding rows repeat it); a lookup compares the block's token ids and its parent's hash as
// well, so a hash collision can only cost a miss, never give wrong K/V. Blocks a sequence holds are never
// evicted (only free blocks are).
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

// A sequence's block tables, one per KV group, all as long as the blocks its positions span: entry i of
// group g is the page holding tokens [i * block_size, (i + 1) * block_size) of g's layers, or -1 once that
// block left g's window (freed; the -1 entries are always a prefix of the table).
struct BlockTables {
  std::vector<std::vector<int32_t>> groups;  // (num_groups, blocks)
  int num_blocks() const { return groups.empty() ? 0 : static_cast<int>(groups[0].size()); }
  bool empty() const { return num_blocks() == 0; }
  int num_held() const;  // entries that are pages (not -1), over all groups
};

class BlockManager {
 public:
  // group_windows: each KV group's window (0 = full attention), kv_groups.hpp.
  BlockManager(int num_blocks, int block_size, bool enable_caching = false, std::vector<int> group_windows = {0});

  int block_size() const { return block_size_; }
  int num_blocks() const { return num_blocks_; }
  int num_groups() const { return static_cast<int>(windows_.size()); }
  int window(int group) const { return windows_[static_cast<size_t>(group)]; }
  bool caching() const { return caching_; }
  int num_free() const { return static_cast<int>(free_.size() + evictable_.size()); }  // cached ones included
  int num_used() const { return num_blocks_ - num_free(); }
  int num_used_in_group(int group) const { return used_in_group_[static_cast<size_t>(group)]; }
  int num_cached() const { return static_cast<int>(evictable_.size()); }  // free blocks with reusable K/V
  int blocks_for_tokens(int64_t num_tokens) const;  // table entries that num_tokens positions span
  // The first table entry a query at position pos (or later) of `group` reads.
  int first_needed_block(int group, int64_t pos) const;

  // Pages a request of num_tokens positions needs at most, as n samples that share the full blocks of their
  // first shared_tokens: a full group's every block; with `sliding` (the continuous scheduler frees what
  // slid out of a window), a windowed group's window_span_blocks for chunks of at most chunk_tokens.
  int64_t pages_for_request(int64_t num_tokens, int n, int64_t shared_tokens, bool sliding, int64_t chunk_tokens) const;

  // Grows every table to hold num_tokens slots with new blocks (evicting cached ones when no other is free).
  // All-or-nothing: returns false and leaves the tables as they were when too few blocks are free.
  bool ensure_capacity(BlockTables& tables, int64_t num_tokens);
  bool can_ensure_capacity(const BlockTables& tables, int64_t num_tokens) const;
  int blocks_needed(const BlockTables& tables, int64_t num_tokens) const;  // pages ensure_capacity takes
  // Gives back the blocks of windowed groups that no query at next_pos or later reads (their entries become
  // -1); returns how many. A registered block stays cached while free.
  int free_outside_window(BlockTables& tables, int64_t next_pos);
  // Drops the tables' reference to each of their blocks and empties them; hashes are cleared with them.
  void release(BlockTables& tables, std::vector<BlockHash>* hashes = nullptr);

  // Takes one more reference to each block of `tables` (a sequence forked from its owner shares them).
  void share(const BlockTables& tables);
  int ref_count(int32_t block) const { return ref_count_[static_cast<size_t>(block)]; }
  // Copy-on-write: in each group where the block that position `pos` falls in is shared, gives `tables` a
  // private block in its place (appending {old, new} to `copies` when pos is not the block's first slot, so
  // the K/V before pos come along). Returns false, changing nothing, when too few blocks are free.
  bool ensure_writable(BlockTables& tables, int pos, std::vector<int32_t>& copies);

  // Prefix caching (no-ops when off; block_cache.cpp). `tables` and `hashes` must be empty: takes the cached
  // blocks of the longest hit (a run of full blocks of tokens[0, max_tokens), see above) and their hashes, a
  // reference to each, and returns the number of tokens they hold. `root`: the first block's parent.
  int match_prefix(const std::vector<int32_t>& tokens, int max_tokens, BlockTables& tables,
                   std::vector<BlockHash>& hashes, const BlockHash& root = {});
  // Registers the full blocks of tokens[0, num_computed) that `hashes` does not cover yet (extends it), so
  // that later lookups find them. A block whose content another block of its group already holds stays
  // unregistered, and so does an entry already freed (-1).
  void commit_full_blocks(const std::vector<int32_t>& tokens, int num_computed, const BlockTables& tables,
                          std::vector<BlockHash>& hashes, const BlockHash& root = {});
  // Whether a block named `hash` is still registered in every full group (its K/V not evicted).
  bool holds_block(const BlockHash& hash) const;

 private:
  struct Cached {
    BlockHash hash;
    BlockHash parent;
    std::vector<int32_t> tokens;  // (block_size) the block's token ids
  };
  void size_tables(BlockTables& tables) const;
  int32_t take_free_block(int group);
  void take_reference(int32_t block);  // of a block found in the cache (free or not)
  void drop_reference(int32_t block);
  void forget(int32_t block);
  // The group's registered block of hash (after parent, holding these tokens), or -1.
  int32_t find_cached(int group, const BlockHash& hash, const BlockHash& parent, const int32_t* tokens) const;
  bool window_hit(int k, const std::vector<BlockHash>& chain, const BlockHash& root, const int32_t* tokens) const;
  int64_t first_served_position(int k) const;

  int num_blocks_;
  int block_size_;
  bool caching_;
  std::vector<int> windows_;                       // (num_groups) 0 = full attention
  std::vector<int> used_in_group_;                 // (num_groups) referenced blocks of each group
  std::vector<int32_t> ref_count_;                 // (num_blocks)
  std::vector<int32_t> block_group_;               // (num_blocks) the group a block last served
  std::vector<int32_t> free_;                      // uncached free blocks, the next to hand out at the back
  std::list<int32_t> evictable_;                   // cached free blocks, least recently released first
  std::vector<std::list<int32_t>::iterator> lru_position_;  // (num_blocks) valid while in evictable_
  std::vector<Cached> cached_;                     // (num_blocks) content of registered blocks
  std::vector<bool> is_registered_;                // (num_blocks)
  std::vector<std::unordered_map<uint64_t, int32_t>> by_hash_;  // (num_groups) hash.lo -> registered block
};

}  // namespace cbatch
