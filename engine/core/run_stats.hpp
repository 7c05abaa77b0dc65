// What one run measured: per-step counters (summed as steps end) and per-request latencies, reduced
// into the summary that run prints and bench records.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace cbatch {

struct StepRecord {
  int64_t step = 0;
  double t_ms = 0;             // end of the step, since the run started
  double step_ms = 0;
  std::string_view mode;
  int num_seqs = 0;
  int prefill_seqs = 0;
  int decode_seqs = 0;
  int prefill_tokens = 0;
  int decode_tokens = 0;
  int padding_tokens = 0;
  int sampled_tokens = 0;      // tokens generated (one per sampling sequence; a prefill's last chunk counts)
  int token_budget = 0;
  int kv_blocks_used = 0;      // after the step (finished sequences have released theirs)
  int kv_blocks_in_step = 0;   // while the step ran (its peak)
  int kv_blocks_total = 0;
  std::vector<int> kv_group_blocks;         // (KV groups) each group's blocks after the step (sum: kv_blocks_used)
  std::vector<int> kv_group_blocks_in_step;  // (KV groups) each group's blocks while the step ran
  int waiting = 0;
  int finished = 0;
  int preempted = 0;
  int cached_tokens = 0;       // tokens of admitted sequences served by the prefix cache, not computed
  int prefix_hits = 0;         // admissions the prefix cache served (cached_tokens > 0)
  int state_snapshots_restored = 0;  // a hybrid model's admissions that restored a state snapshot this step
  int state_snapshots_saved = 0;     // states saved into snapshots at the step's end
  int state_snapshots_cached = 0;    // snapshots registered after the step
  int state_snapshots_total = 0;     // the snapshot pool (0: none)
  int kv_blocks_cached = 0;    // free blocks holding reusable K/V after the step
  int state_slots_used = 0;    // a hybrid model's recurrent-state slots held while the step ran
  int state_slots_total = 0;   // its pool (0: no recurrent layers)
  int64_t state_bytes = 0;     // the held slots' bytes
  int constrained_rows = 0;    // rows sampled under a structured-output constraint
  double mask_ms = 0;          // host time computing and applying their token masks
  int experts_touched = -1;    // MoE: distinct experts picked, summed over sparse layers; -1 for a dense model
  int embedding_seqs = 0;      // embedding inputs computed (whole) and pooled in the step
  int embedding_tokens = 0;    // their tokens (part of prefill_tokens)
  double roofline_ms = 0;      // the step's hardware limit (0 when the device peaks are not measured)
  double flops = 0;            // the step's useful flops (the cost model's; 0 without device peaks)
  double bytes = 0;            // the bytes it must move (the cost model's; 0 without device peaks)
  double expert_bytes = 0;     // their routed experts' part
  double schedule_ms = 0;      // host: schedule + pack
  double forward_ms = 0;       // the backend's forward() call
  double update_ms = 0;        // host: sampling, stop checks, bookkeeping, output
};

struct RunSummary {
  int64_t requests_ok = 0;
  int64_t requests_failed = 0;
  int64_t prompt_tokens = 0;
  int64_t output_tokens = 0;
  double wall_s = 0;
  int64_t steps = 0;
  double mean_budget_use = 0;
  double padding_fraction = 0;
  int64_t preemptions = 0;
  int64_t cached_tokens = 0;   // summed over steps
  int64_t prefix_hits = 0;     // admissions the prefix cache served, summed over steps
  int64_t state_snapshots_restored = 0;  // summed over steps
  int64_t state_snapshots_saved = 0;     // summed over steps
  int64_t state_snapshots_evicted = 0;   // registered snapshots dropped for a new one
  int state_snapshots_total = 0;         // the snapshot pool of a hybrid model's prefix cache (0: none)
  int64_t prefill_tokens = 0;  // computed prefill tokens, summed over steps
  int64_t constrained_rows = 0;  // summed over steps
  double mask_s = 0;           // host time computing token masks, summed
  int peak_kv_blocks = 0;
  int kv_blocks_total = 0;
  int peak_num_seqs = 0;       // most sequences one step ran
  // KV groups (kv_groups.hpp): a block holds block_size tokens of one group's layers_per_block layers.
  int64_t kv_block_bytes = 0;              // one block's K and V bytes
  int kv_layers_per_block = 0;
  std::vector<int> kv_group_windows;       // (KV groups) 0 = full attention
  std::vector<int> peak_kv_group_blocks;   // (KV groups) most blocks each group held while a step ran
  int peak_state_slots = 0;        // a hybrid model's recurrent-state slots: most held after a step
  int state_slots_total = 0;       // the pool (0: no recurrent layers)
  int64_t state_slot_bytes = 0;    // one slot's bytes
  int64_t weight_bytes = 0;        // the backend's weight matrices in memory (BackendTraits::weight_bytes)
  bool prefix_caching_off_for_state = false;  // asked for, but off: a recurrent state is not in the blocks
  double ttft_ms_p50 = 0, ttft_ms_p99 = 0;
  double e2e_ms_p50 = 0, e2e_ms_p99 = 0;
  bool interrupted = false;
  double roofline_s = 0;       // sum of the steps' roofline times
  double flops = 0;            // sum of the steps' useful flops
  double bytes = 0;            // sum of the steps' bytes to move (the cost model's)
  double expert_bytes = 0;     // their routed experts' part
  int64_t experts_touched = 0;  // MoE: the steps' experts_touched summed (0 for a dense model)
  double schedule_s = 0;       // host time in schedule + pack, summed
  double forward_s = 0;        // time in the backend's forward(), summed
  double update_s = 0;         // host time sampling and updating, summed

  int64_t resumed_ok = 0;      // --resume: lines skipped because the output file already has their result
  int64_t resumed_failed = 0;  // ... or their error line

  // Of the prompt (and recompute) tokens admissions needed, the share the prefix cache served: cached /
  // (cached + computed prefill), both from the trace. Without preemption, cached prompt tokens / prompt tokens.
  double prefix_cache_hit_rate() const {
    return cached_tokens + prefill_tokens > 0 ? static_cast<double>(cached_tokens) / (cached_tokens + prefill_tokens) : 0;
  }
  double roofline_fraction() const { return wall_s > 0 ? roofline_s / wall_s : 0; }
  double output_tokens_per_s() const { return wall_s > 0 ? output_tokens / wall_s : 0; }
  double total_tokens_per_s() const { return wall_s > 0 ? (prompt_tokens + output_tokens) / wall_s : 0; }
  double requests_per_s() const { return wall_s > 0 ? requests_ok / wall_s : 0; }
};

class RunStats {
 public:
  void add_step(const StepRecord& record);
  void add_request(int prompt_tokens, int output_tokens, double ttft_ms, double e2e_ms);
  void add_failure() { ++summary_.requests_failed; }
  // Reduces everything so far; wall_s is the caller's.
  RunSummary summarize(double wall_s) const;

 private:
  RunSummary summary_;
  double budget_use_sum_ = 0;
  int64_t useful_tokens_ = 0;
  int64_t padding_tokens_ = 0;
  std::vector<double> ttft_ms_;
  std::vector<double> e2e_ms_;
};

// Nearest-rank percentile (q in [0, 100]) of values; 0 when empty.
double percentile(std::vector<double> values, double q);

}  // namespace cbatch
