// Turns a StepPlan into the flat RaggedBatch every backend consumes.
#pragma once
#include "engine/backend/ragged_batch.hpp"
#include "engine/core/step_plan.hpp"

namespace cbatch {

// Rows of one sequence: its real tokens tokens[num_computed, num_computed + n) with their positions and
// KV slots (one per KV group), then its padding rows (slot -1, repeating the last cached position). A
// sequence that samples contributes its last real row to logits_rows. Every sequence's block tables have
// num_kv_groups groups; the batch gets each group's table and slots.
void pack_batch(const StepPlan& plan, int block_size, int num_kv_groups, RaggedBatch& batch);

}  // namespace cbatch
