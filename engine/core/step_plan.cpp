#include "engine/core/step_plan.hpp"

namespace cbatch {

namespace {

template <typename F>
int sum_over(const std::vector<ScheduledSeq>& seqs, F f) {
  int total = 0;
  for (const ScheduledSeq& s : seqs) total += f(s);
  return total;
}

}  // namespace

int StepPlan::num_prefill_tokens() const {
  return sum_over(seqs, [](const ScheduledSeq& s) { return s.is_prefill ? s.num_tokens : 0; });
}
int StepPlan::num_decode_tokens() const {
  return sum_over(seqs, [](const ScheduledSeq& s) { return s.is_prefill ? 0 : s.num_tokens; });
}
int StepPlan::num_padding_tokens() const {
  return sum_over(seqs, [](const ScheduledSeq& s) { return s.num_padding; });
}
int StepPlan::num_prefill_seqs() const {
  return sum_over(seqs, [](const ScheduledSeq& s) { return s.is_prefill && s.num_tokens > 0 ? 1 : 0; });
}
int StepPlan::num_decode_seqs() const {
  return sum_over(seqs, [](const ScheduledSeq& s) { return !s.is_prefill && s.num_tokens > 0 ? 1 : 0; });
}
int StepPlan::num_sampling_seqs() const {
  return sum_over(seqs, [](const ScheduledSeq& s) { return s.samples ? 1 : 0; });
}

}  // namespace cbatch
