// The one input type of every backend: a step's tokens packed flat, with no padding in continuous mode.
// Row r belongs to sequence s when query_start[s] <= r < query_start[s+1]. Row r attends causally to
// cache positions 0..positions[r] of its sequence (a windowed layer: the last `window` of them) through the
// sequence's block table of the layer's KV group (kv_groups.hpp); its own K/V are written to its slot in that
// group first. A windowed group's table holds -1 for blocks that slid out of the window (freed, maybe in use
// by another sequence by now): attention never reads them. A padding row (static mode) has slot_mapping -1: it is computed in
// full (that is the waste static batching pays) but stores nothing, and its position repeats a
// position whose K/V is already in the cache, so it attends only to real tokens. With a bidirectional
// model (an encoder) every row attends to all seq_lens[s] positions of its sequence instead.
#pragma once
#include <cstdint>
#include <vector>

#include "engine/base/embedding_params.hpp"

namespace cbatch {

struct RaggedBatch {
  std::vector<int32_t> token_ids;     // (num_tokens)
  std::vector<int32_t> positions;     // (num_tokens) position of each token in its sequence
  // (num_kv_groups, num_tokens) block * block_size + offset in each group's pages, or -1 (padding, in every
  // group); group 0's row doubles as the padding marker for layers without K/V.
  std::vector<int32_t> slot_mapping;
  std::vector<int32_t> query_start;   // (num_seqs + 1) cu_seqlens: first row of each sequence
  std::vector<int32_t> seq_lens;      // (num_seqs) tokens of the sequence in the cache after this step
  // (num_kv_groups, num_seqs, max_blocks_per_seq) physical block ids, -1 unused or freed (slid out)
  std::vector<int32_t> block_tables;
  int max_blocks_per_seq = 0;
  int num_kv_groups = 1;
  int max_seq_len = 0;                // max of seq_lens
  int max_query_len = 0;              // most rows of one sequence
  std::vector<int32_t> logits_rows;   // (num_sampling) rows whose logits are needed, ascending
  // (num_copies, 2) source and destination block ids: every layer's K and V of the source block are
  // copied to the destination before anything else runs (copy-on-write of a block that n > 1 samples shared);
  // a block is one group's page, so every cache slot of the page is copied.
  std::vector<int32_t> block_copies;
  std::vector<int32_t> lora_ids;      // (num_seqs) LoRA adapter of each sequence, 0 = the base model
  // A hybrid model's recurrent state: (num_seqs) each sequence's state slot (-1: a model without one); a
  // sequence whose first row is position 0 starts from a zero state. (num_copies, 2) source and destination
  // slots: a forked sample's copy of its parent's state, made before anything else runs (after block_copies).
  std::vector<int32_t> state_slots;
  std::vector<int32_t> state_copies;
  // (num_seqs) first position of token type 1 (a cross-encoder's second text) in each sequence; a
  // position past the sequence (INT32_MAX) when it has one segment. Only encoders read it.
  std::vector<int32_t> second_segment;
  // Sequences whose prompt is computed whole in this step and returned pooled (embedding requests), each
  // with its pooling: rows of such a sequence are its whole prompt.
  std::vector<int32_t> pooled_seqs;   // (num_pooled) ascending sequence indices
  std::vector<Pooling> pooling;       // (num_pooled)

  int num_tokens() const { return static_cast<int>(token_ids.size()); }
  // Group g's block table of sequence s, and group g's slots (num_tokens).
  const int32_t* block_table(int group, int s) const {
    return block_tables.data() + (static_cast<size_t>(group) * num_seqs() + static_cast<size_t>(s)) * max_blocks_per_seq;
  }
  const int32_t* slots(int group) const { return slot_mapping.data() + static_cast<size_t>(group) * num_tokens(); }
  int num_seqs() const { return static_cast<int>(seq_lens.size()); }
  int num_logits() const { return static_cast<int>(logits_rows.size()); }
  int num_block_copies() const { return static_cast<int>(block_copies.size() / 2); }
  int num_state_copies() const { return static_cast<int>(state_copies.size() / 2); }
  int num_pooled() const { return static_cast<int>(pooled_seqs.size()); }
  // The token type of row r (0 or 1) of sequence s.
  int token_type(int s, int r) const {
    return !second_segment.empty() && positions[r] >= second_segment[s] ? 1 : 0;
  }
  void clear();
};

}  // namespace cbatch
