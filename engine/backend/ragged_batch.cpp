#include "engine/backend/ragged_batch.hpp"

namespace cbatch {

void RaggedBatch::clear() {
  token_ids.clear();
  positions.clear();
  slot_mapping.clear();
  query_start.clear();
  seq_lens.clear();
  block_tables.clear();
  logits_rows.clear();
  block_copies.clear();
  lora_ids.clear();
  state_slots.clear();
  state_copies.clear();
  pooled_seqs.clear();
  second_segment.clear();
  pooling.clear();
  max_blocks_per_seq = 0;
  num_kv_groups = 1;
  max_seq_len = 0;
  max_query_len = 0;
}

}  // namespace cbatch
