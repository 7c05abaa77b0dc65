// Hand-built ragged steps for backend tests (KV block size 4): rows of a sequence appended to a batch, the
// block tables set, and the two-prompt step the blocked-versus-fp32 weight tests run.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "engine/backend/backend.hpp"
#include "tests/engine/step_io.hpp"

namespace cbatch::testing {

// Appends rows [begin, end) of a sequence that owns block table `table` (block size 4), the last one sampled
// when `sample`, then `padding` rows that write nothing.
inline void add_rows(RaggedBatch& b, const std::vector<int32_t>& tokens, const std::vector<int32_t>& table, int begin,
                     int end, int padding, bool sample) {
  if (b.query_start.empty()) b.query_start.push_back(0);
  for (int p = begin; p < end; ++p) {
    b.token_ids.push_back(tokens[p]);
    b.positions.push_back(p);
    b.slot_mapping.push_back(table[p / 4] * 4 + p % 4);
  }
  if (sample) b.logits_rows.push_back(b.num_tokens() - 1);
  for (int i = 0; i < padding; ++i) {
    b.token_ids.push_back(tokens[end - 1]);
    b.positions.push_back(end - 1);
    b.slot_mapping.push_back(-1);
  }
  b.query_start.push_back(b.num_tokens());
  b.seq_lens.push_back(end);
  b.max_seq_len = std::max(b.max_seq_len, end);
}

// The block tables of the batch's sequences, in order, padded with -1 to the longest.
inline void set_tables(RaggedBatch& b, const std::vector<const std::vector<int32_t>*>& tables) {
  b.max_blocks_per_seq = 0;
  for (auto* t : tables) b.max_blocks_per_seq = std::max(b.max_blocks_per_seq, static_cast<int>(t->size()));
  for (auto* t : tables) {
    b.block_tables.insert(b.block_tables.end(), t->begin(), t->end());
    b.block_tables.insert(b.block_tables.end(), b.max_blocks_per_seq - t->size(), -1);
  }
}

// A batch packed for one KV group, spread over num_groups groups (a model with windowed and full layers,
// kv_groups.hpp): group g's tables and slots are group 0's with `offset` blocks added, so that no two groups
// share a page (the cache needs num_groups * offset blocks).
inline void spread_kv_groups(RaggedBatch& b, int num_groups, int offset) {
  const std::vector<int32_t> slots = b.slot_mapping, tables = b.block_tables;
  for (int g = 1; g < num_groups; ++g) {
    for (int32_t s : slots) b.slot_mapping.push_back(s < 0 ? -1 : s + g * offset * 4);
    for (int32_t t : tables) b.block_tables.push_back(t < 0 ? -1 : t + g * offset);
  }
  b.num_kv_groups = num_groups;
}

// The logits of a prefill step of two prompts (7 and 5 tokens of a vocabulary of at least 251: 6 rows of the
// first, 5 of the second and `padding` rows after it, each one's last row sampled) and of a one-row decode
// step of the first (the one-row kernels); 3 rows of logits. `experts_touched`, when given, gets the
// prefill's count. num_kv_groups: the model's KV groups (kv_groups.hpp).
inline std::vector<float> two_prompts_then_decode(Backend& backend, int padding = 0, int* experts_touched = nullptr,
                                                  int num_kv_groups = 1) {
  const std::vector<int32_t> a = {1, 17, 42, 99, 5, 250, 3}, b = {1, 200, 201, 202, 7};
  const std::vector<int32_t> table_a = {5, 2}, table_b = {0, 30};
  backend.allocate_kv_cache({32 * num_kv_groups, 4});
  StepIo out;
  RaggedBatch prefill;
  add_rows(prefill, a, table_a, 0, 6, 0, true);
  add_rows(prefill, b, table_b, 0, 5, padding, true);
  set_tables(prefill, {&table_a, &table_b});
  spread_kv_groups(prefill, num_kv_groups, 32);
  backend.forward(prefill, out, out);
  if (experts_touched != nullptr) *experts_touched = out.experts_touched;
  std::vector<float> logits = out.logits;
  RaggedBatch decode;
  add_rows(decode, a, table_a, 6, 7, 0, true);
  set_tables(decode, {&table_a});
  spread_kv_groups(decode, num_kv_groups, 32);
  backend.forward(decode, out, out);
  logits.insert(logits.end(), out.logits.begin(), out.logits.end());
  return logits;
}

}  // namespace cbatch::testing
