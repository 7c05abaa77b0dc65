#include "engine/core/run_stats.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace cbatch {

void RunStats::add_step(const StepRecord& r) {
  ++summary_.steps;
  const int useful = r.prefill_tokens + r.decode_tokens;
  useful_tokens_ += useful;
  padding_tokens_ += r.padding_tokens;
  budget_use_sum_ += static_cast<double>(useful + r.padding_tokens) / r.token_budget;
  summary_.preemptions += r.preempted;
  summary_.cached_tokens += r.cached_tokens;
  summary_.prefix_hits += r.prefix_hits;
  summary_.state_snapshots_restored += r.state_snapshots_restored;
  summary_.state_snapshots_saved += r.state_snapshots_saved;
  summary_.prefill_tokens += r.prefill_tokens;
  summary_.constrained_rows += r.constrained_rows;
  summary_.mask_s += r.mask_ms * 1e-3;
  summary_.peak_kv_blocks = std::max(summary_.peak_kv_blocks, r.kv_blocks_in_step);
  summary_.kv_blocks_total = r.kv_blocks_total;
  summary_.peak_num_seqs = std::max(summary_.peak_num_seqs, r.num_seqs);
  std::vector<int>& peaks = summary_.peak_kv_group_blocks;
  if (peaks.size() < r.kv_group_blocks_in_step.size()) peaks.resize(r.kv_group_blocks_in_step.size(), 0);
  for (size_t g = 0; g < r.kv_group_blocks_in_step.size(); ++g) peaks[g] = std::max(peaks[g], r.kv_group_blocks_in_step[g]);
  summary_.peak_state_slots = std::max(summary_.peak_state_slots, r.state_slots_used);
  summary_.roofline_s += r.roofline_ms * 1e-3;
  summary_.flops += r.flops;
  summary_.bytes += r.bytes;
  summary_.expert_bytes += r.expert_bytes;
  if (r.experts_touched > 0) summary_.experts_touched += r.experts_touched;
  summary_.schedule_s += r.schedule_ms * 1e-3;
  summary_.forward_s += r.forward_ms * 1e-3;
  summary_.update_s += r.update_ms * 1e-3;
}

void RunStats::add_request(int prompt_tokens, int output_tokens, double ttft_ms, double e2e_ms) {
  ++summary_.requests_ok;
  summary_.prompt_tokens += prompt_tokens;
  summary_.output_tokens += output_tokens;
  ttft_ms_.push_back(ttft_ms);
  e2e_ms_.push_back(e2e_ms);
}

RunSummary RunStats::summarize(double wall_s) const {
  RunSummary s = summary_;
  s.wall_s = wall_s;
  s.mean_budget_use = s.steps > 0 ? budget_use_sum_ / static_cast<double>(s.steps) : 0;
  const int64_t computed = useful_tokens_ + padding_tokens_;
  s.padding_fraction = computed > 0 ? static_cast<double>(padding_tokens_) / static_cast<double>(computed) : 0;
  s.ttft_ms_p50 = percentile(ttft_ms_, 50);
  s.ttft_ms_p99 = percentile(ttft_ms_, 99);
  s.e2e_ms_p50 = percentile(e2e_ms_, 50);
  s.e2e_ms_p99 = percentile(e2e_ms_, 99);
  return s;
}

double percentile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  const size_t rank = static_cast<size_t>(std::ceil(q / 100.0 * static_cast<double>(values.size())));
  const size_t index = std::min(values.size() - 1, rank == 0 ? 0 : rank - 1);
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(index), values.end());
  return values[index];
}

}  // namespace cbatch
