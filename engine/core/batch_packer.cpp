#include "engine/core/batch_packer.hpp"

#include <algorithm>
#include <cassert>
#include <cstdint>

namespace cbatch {
namespace {

void pack_sequence(const ScheduledSeq& s, int block_size, RaggedBatch& batch) {
  const Sequence& seq = *s.seq;
  const int begin = seq.num_computed;
  const int end = begin + s.num_tokens;
  assert(end <= seq.num_tokens());
  assert(static_cast<int64_t>(seq.block_tables.num_blocks()) * block_size >= end);
  (void)block_size;
  for (int p = begin; p < end; ++p) {
    batch.token_ids.push_back(seq.tokens[p]);
    batch.positions.push_back(p);
  }
  if (s.samples) batch.logits_rows.push_back(batch.num_tokens() - 1);
  if (seq.request->embedding && end == seq.num_tokens()) {  // an embedding request is scheduled whole
    batch.pooled_seqs.push_back(batch.num_seqs());
    batch.pooling.push_back(seq.request->embedding->pooling);
  }
  // Padding rows attend to the cached prefix [0, end) as if they were its last token again.
  assert(s.num_padding == 0 || end > 0);
  for (int i = 0; i < s.num_padding; ++i) {
    batch.token_ids.push_back(seq.tokens[end - 1]);
    batch.positions.push_back(end - 1);
  }
  batch.query_start.push_back(batch.num_tokens());
  batch.seq_lens.push_back(end);
  batch.lora_ids.push_back(seq.request->lora_id);
  batch.state_slots.push_back(seq.state_slot);
  batch.second_segment.push_back(seq.second_segment > 0 ? seq.second_segment : INT32_MAX);
  batch.max_seq_len = std::max(batch.max_seq_len, end);
  batch.max_query_len = std::max(batch.max_query_len, s.num_tokens + s.num_padding);
}

// Each group's slots of the real rows (padding rows keep -1): the group's page of the row's position.
void pack_slots(const StepPlan& plan, int block_size, RaggedBatch& batch) {
  const size_t rows = static_cast<size_t>(batch.num_tokens());
  batch.slot_mapping.assign(static_cast<size_t>(batch.num_kv_groups) * rows, -1);
  for (int g = 0; g < batch.num_kv_groups; ++g) {
    int32_t* slots = batch.slot_mapping.data() + static_cast<size_t>(g) * rows;
    for (size_t i = 0; i < plan.seqs.size(); ++i) {
      const ScheduledSeq& s = plan.seqs[i];
      const std::vector<int32_t>& table = s.seq->block_tables.groups[static_cast<size_t>(g)];
      for (int r = batch.query_start[i]; r < batch.query_start[i] + s.num_tokens; ++r) {
        const int p = batch.positions[r];
        assert(table[static_cast<size_t>(p / block_size)] >= 0);  // a row's own block is never freed
        slots[r] = table[static_cast<size_t>(p / block_size)] * block_size + p % block_size;
      }
    }
  }
}

}  // namespace

void pack_batch(const StepPlan& plan, int block_size, int num_kv_groups, RaggedBatch& batch) {
  batch.clear();
  batch.num_kv_groups = num_kv_groups;
  batch.query_start.push_back(0);
  for (const ScheduledSeq& s : plan.seqs) {
    assert(static_cast<int>(s.seq->block_tables.groups.size()) == num_kv_groups);
    batch.max_blocks_per_seq = std::max(batch.max_blocks_per_seq, s.seq->block_tables.num_blocks());
  }
  for (const ScheduledSeq& s : plan.seqs) pack_sequence(s, block_size, batch);
  pack_slots(plan, block_size, batch);
  batch.block_copies = plan.block_copies;
  batch.state_copies = plan.state_copies;
  const size_t width = static_cast<size_t>(batch.max_blocks_per_seq);
  const size_t num_seqs = plan.seqs.size();
  batch.block_tables.assign(static_cast<size_t>(num_kv_groups) * num_seqs * width, -1);
  for (size_t g = 0; g < static_cast<size_t>(num_kv_groups); ++g) {
    for (size_t i = 0; i < num_seqs; ++i) {
      const std::vector<int32_t>& table = plan.seqs[i].seq->block_tables.groups[g];
      std::copy(table.begin(), table.end(), batch.block_tables.begin() + static_cast<std::ptrdiff_t>((g * num_seqs + i) * width));
    }
  }
}

}  // namespace cbatch
