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
  assert(static_cast<int64_t>(seq.block_table.size()) * block_size >= end);
  for (int p = begin; p < end; ++p) {
    batch.token_ids.push_back(seq.tokens[p]);
    batch.positions.push_back(p);
    batch.slot_mapping.push_back(seq.block_table[p / block_size] * block_size + p % block_size);
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
    batch.slot_mapping.push_back(-1);
  }
  batch.query_start.push_back(batch.num_tokens());
  batch.seq_lens.push_back(end);
  batch.lora_ids.push_back(seq.request->lora_id);
  batch.state_slots.push_back(seq.state_slot);
  batch.second_segment.push_back(seq.second_segment > 0 ? seq.second_segment : INT32_MAX);
  batch.max_seq_len = std::max(batch.max_seq_len, end);
  batch.max_query_len = std::max(batch.max_query_len, s.num_tokens + s.num_padding);
}

}  // namespace

void pack_batch(const StepPlan& plan, int block_size, RaggedBatch& batch) {
  batch.clear();
  batch.query_start.push_back(0);
  for (const ScheduledSeq& s : plan.seqs) {
    batch.max_blocks_per_seq = std::max(batch.max_blocks_per_seq, static_cast<int>(s.seq->block_table.size()));
  }
  for (const ScheduledSeq& s : plan.seqs) pack_sequence(s, block_size, batch);
  batch.block_copies = plan.block_copies;
  batch.state_copies = plan.state_copies;
  const size_t width = static_cast<size_t>(batch.max_blocks_per_seq);
  batch.block_tables.assign(plan.seqs.size() * width, -1);
  for (size_t i = 0; i < plan.seqs.size(); ++i) {
    const std::vector<int32_t>& table = plan.seqs[i].seq->block_table;
    std::copy(table.begin(), table.end(), batch.block_tables.begin() + static_cast<std::ptrdiff_t>(i * width));
  }
}

}  // namespace cbatch
