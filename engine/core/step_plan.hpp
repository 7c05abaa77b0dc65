// What the scheduler decided for one engine step: which sequences run how many new tokens (a prefill
// chunk, or one decode token), how many padding rows each carries (static mode), and whether the step
// ends with a sampled token for it. The packer turns it into a RaggedBatch; the engine commits it.
#pragma once
#include <vector>

#include "engine/core/sequence.hpp"

namespace cbatch {

struct ScheduledSeq {
  Sequence* seq = nullptr;
  int num_tokens = 0;       // real tokens computed this step: tokens[num_computed, num_computed + n)
  int num_padding = 0;      // extra rows computed and thrown away (static mode only)
  bool is_prefill = false;  // prompt (or recompute) chunk rather than one decode token
  bool samples = false;     // the step completes the sequence's tokens: sample the next one
};

struct StepPlan {
  std::vector<ScheduledSeq> seqs;
  std::vector<Sequence*> preempted;   // preempted during this schedule() call (blocks already freed)
  int cached_tokens = 0;              // tokens of admitted sequences the prefix cache served (not computed)
  int prefix_hits = 0;                // admitted sequences it served
  std::vector<int32_t> block_copies;  // (copies, 2) copy-on-write source and destination blocks (RaggedBatch)
  // (copies, 2) source and destination state slots, in order: state snapshots saved at the last step's end,
  // forked samples' copies, then snapshots restored into admitted sequences' slots
  std::vector<int32_t> state_copies;
  std::vector<int32_t> restored_snapshots;  // snapshots pinned by this step's restores (unpinned at its end)

  int num_prefill_tokens() const;
  int num_decode_tokens() const;
  int num_padding_tokens() const;
  int num_prefill_seqs() const;
  int num_decode_seqs() const;
  int num_sampling_seqs() const;  // tokens this step generates
  int num_rows() const { return num_prefill_tokens() + num_decode_tokens() + num_padding_tokens(); }
  bool empty() const { return seqs.empty(); }
};

}  // namespace cbatch
