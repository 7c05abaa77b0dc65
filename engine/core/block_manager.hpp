// The paged KV block manager: a fixed pool of blocks of `block_size` token slots, a LIFO free list, and
// per-sequence block tables owned by the sequences. Invariant: every block is either on the free list or
// in exactly one block table; at the end of a run num_free() == num_blocks().
#pragma once
#include <cstdint>
#include <vector>

namespace cbatch {

class BlockManager {
 public:
  BlockManager(int num_blocks, int block_size);

  int block_size() const { return block_size_; }
  int num_blocks() const { return num_blocks_; }
  int num_free() const { return static_cast<int>(free_.size()); }
  int num_used() const { return num_blocks_ - num_free(); }
  int blocks_for_tokens(int64_t num_tokens) const;

  // Grows `table` to hold num_tokens slots. All-or-nothing: returns false and leaves the table as it
  // was when the free list is short.
  bool ensure_capacity(std::vector<int32_t>& table, int64_t num_tokens);
  bool can_ensure_capacity(const std::vector<int32_t>& table, int64_t num_tokens) const;
  // Returns every block of the table to the free list and empties it.
  void release(std::vector<int32_t>& table);

 private:
  int num_blocks_;
  int block_size_;
  std::vector<int32_t> free_;      // (num_free) physical block ids, the next to hand out at the back
};

}  // namespace cbatch
