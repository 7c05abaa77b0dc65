#include "engine/core/step_sampling.hpp"

#include <algorithm>
#include <array>
#include <cmath>

#include "engine/base/error.hpp"
#include "engine/base/signal_block.hpp"
#include "engine/constrain/constraint_mask.hpp"
#include "engine/core/result_emitter.hpp"
#include "engine/sample/sampler.hpp"

namespace cbatch {
namespace {

// softmax over the two logits {yes, no}, its "yes" entry: 1 / (1 + exp(no - yes)), in double.
double yes_probability(const float* logits, const std::array<int32_t, 2>& yes_no) {
  const double diff = static_cast<double>(logits[yes_no[1]]) - static_cast<double>(logits[yes_no[0]]);
  return 1.0 / (1.0 + std::exp(diff));
}

bool any_row(const StepPlan& plan, bool (*pred)(const ScheduledSeq&)) {
  return std::any_of(plan.seqs.begin(), plan.seqs.end(), pred);
}

}  // namespace

void StepSampling::prepare(const StepPlan& plan, StepRequest& out) {
  constrained_rows_ = 0;
  mask_ms_ = 0;
  blocked_.clear();
  bool plain_greedy = true;
  bool constrained = false;
  bool biased = false;
  for (const ScheduledSeq& s : plan.seqs) {
    const SamplingParams& p = s.seq->request->sampling;
    plain_greedy = plain_greedy && (!s.samples || (p.is_greedy() && !p.has_penalties()));
    constrained = constrained || (s.samples && s.seq->constraint);
    biased = biased || (s.samples && p.has_logit_bias());
  }
  plain_greedy = plain_greedy && !constrained;
  out.sampling.clear();
  out.penalty_tokens.clear();
  out.token_mask.clear();
  // A forking row draws n tokens from one row of logits: the host samples those.
  const bool forks = any_row(plan, [](const ScheduledSeq& s) { return s.samples && s.seq->pending_samples > 1; });
  // A backend that answers no logprob queries returns the logits of such rows for the host to reduce.
  const bool host_logprobs = !backend_.traits().answers_logprob_queries && LogprobSteps::any_sampling_row(plan);
  const bool scores = any_row(plan, [](const ScheduledSeq& s) { return s.samples && s.seq->request->is_score(); });
  // Only the host's Sampler applies a logit_bias.
  out.want_logits = scores || host_logprobs || biased || (!plain_greedy && (!backend_.traits().samples_on_device || forks));
  if (out.want_logits || plain_greedy) return;
  int64_t mask_ns = 0;
  for (const ScheduledSeq& s : plan.seqs) {
    const Sequence& seq = *s.seq;
    if (!s.samples) continue;
    const SamplingParams& p = seq.request->sampling;
    RowSampling row = row_sampling(p, seq.rng_seed, static_cast<int64_t>(seq.tokens.size()) - seq.num_prompt_tokens);
    blocked_.push_back(false);
    if (seq.constraint) {
      ++constrained_rows_;
      const int64_t mask_start = engine_now_ns();
      row.mask_offset = append_constraint_mask(*seq.constraint, seq.constraint_state, model_.tokenizer->eos_ids(),
                                               model_.config.vocab_size, out.token_mask);
      mask_ns += engine_now_ns() - mask_start;
      if (row.mask_offset < 0) {  // nothing may follow: the row ends (commit), its plain argmax unused
        blocked_.back() = true;
        out.sampling.push_back(RowSampling{});
        continue;
      }
    }
    if (p.has_penalties()) {
      row.penalty_begin = static_cast<int32_t>(out.penalty_tokens.size());
      append_penalty_tokens(seq.tokens, seq.num_prompt_tokens, model_.config.vocab_size, out.penalty_tokens,
                            penalty_slot_);
      row.penalty_end = static_cast<int32_t>(out.penalty_tokens.size());
    }
    out.sampling.push_back(row);
  }
  mask_ms_ = static_cast<double>(mask_ns) * 1e-6;
}

void StepSampling::sample(const StepPlan& plan, const std::vector<std::pair<Sequence*, int32_t>>& forked,
                          const StepRequest& request, StepResult& out, LogprobSteps& logprobs) {
  rows_.clear();
  logits_row_.clear();
  for (const ScheduledSeq& s : plan.seqs) {
    if (!s.samples) continue;
    logits_row_.push_back(static_cast<int32_t>(rows_.size()));
    rows_.push_back(s.seq);
  }
  const int64_t num_logits = static_cast<int64_t>(rows_.size());
  for (auto& [child, row] : forked) {
    rows_.push_back(child);
    logits_row_.push_back(row);
  }
  const int64_t n = static_cast<int64_t>(rows_.size());
  sampled_.resize(static_cast<size_t>(n));
  if (!request.want_logits) {
    if (out.token_ids.size() != static_cast<size_t>(num_logits)) {
      throw Error("internal error: the backend returned " + std::to_string(out.token_ids.size()) +
                  " token ids for " + std::to_string(num_logits) + " sampling rows");
    }
    for (int64_t i = 0; i < n; ++i) sampled_[static_cast<size_t>(i)] = out.token_ids[static_cast<size_t>(logits_row_[static_cast<size_t>(i)])];
    return;
  }
  const int vocab = model_.config.vocab_size;
  // Each draw gets a row of its own: the sampler changes its row (penalties), and forked samples share
  // their parent's row, so theirs are copied first.
  row_logits_.resize(static_cast<size_t>(n));
  blocked_.assign(static_cast<size_t>(n), false);
  fork_logits_.resize(static_cast<size_t>(n - num_logits) * vocab);
  for (int64_t i = 0; i < n; ++i) {
    float* row = &out.logits[static_cast<size_t>(logits_row_[static_cast<size_t>(i)]) * vocab];
    if (i >= num_logits) {
      float* copy = &fork_logits_[static_cast<size_t>(i - num_logits) * vocab];
      std::copy_n(row, vocab, copy);
      row = copy;
    }
    row_logits_[static_cast<size_t>(i)] = row;
  }
  logprobs.keep_raw_rows(rows_, row_logits_);  // before masks and penalties change them
  for (int64_t i = 0; i < n; ++i) {
    Sequence& seq = *rows_[static_cast<size_t>(i)];
    if (seq.request->is_score()) seq.score = yes_probability(row_logits_[static_cast<size_t>(i)], seq.request->score_token_ids);
  }
  const int64_t mask_start = engine_now_ns();
  constrained_rows_ = 0;
  for (int64_t i = 0; i < n; ++i) {
    Sequence& seq = *rows_[static_cast<size_t>(i)];
    if (!seq.constraint) continue;
    blocked_[static_cast<size_t>(i)] = !structured_.mask_logits(seq, row_logits_[static_cast<size_t>(i)]);
    ++constrained_rows_;
  }
  mask_ms_ = constrained_rows_ > 0 ? static_cast<double>(engine_now_ns() - mask_start) * 1e-6 : 0.0;
  draw(n, vocab);
}

// One draw per row from its (masked) logits, the rows spread over the sampling threads.
void StepSampling::draw(int64_t num_rows, int vocab) {
  auto sample_range = [&](int64_t begin, int64_t end) {
    thread_local Sampler sampler;  // scratch of one vocabulary per thread, kept between steps
    for (int64_t row = begin; row < end; ++row) {
      Sequence& seq = *rows_[static_cast<size_t>(row)];
      sampled_[static_cast<size_t>(row)] = sampler.sample(row_logits_[static_cast<size_t>(row)], vocab,
                                                          seq.request->sampling, seq.tokens, seq.num_prompt_tokens,
                                                          seq.rng_seed);
    }
  };
  if (num_rows < 2 || config_.sampling_threads == 1) return sample_range(0, num_rows);
  if (!pool_) {
    const StopSignalsBlocked blocked;  // the stop handler runs on the main thread, never on a worker
    pool_ = std::make_unique<ThreadPool>(config_.sampling_threads);
  }
  pool_->parallel_for(num_rows, sample_range);
}

}  // namespace cbatch
