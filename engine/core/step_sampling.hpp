// A step's tokens, the engine's side: before the forward, what the backend is asked to return for the
// step's sampling rows (argmax ids when every row is greedy and plain; the draws themselves when the
// backend samples on its device, with each row's parameters, penalty tokens and constraint mask; else the
// logits); after it, one token per sampling row and per sample forked this step (n > 1: a fork draws from
// its parent's row with its own seed), drawn by the host's Sampler over the sampling threads when the
// backend returned logits. A row's draw depends only on its own logits and request, so neither the split
// over threads nor the batch changes a token.
#pragma once
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "engine/backend/backend.hpp"
#include "engine/base/thread_pool.hpp"
#include "engine/core/engine_config.hpp"
#include "engine/core/logprob_steps.hpp"
#include "engine/core/step_plan.hpp"
#include "engine/core/structured_outputs.hpp"

namespace cbatch {

class StepSampling {
 public:
  StepSampling(const EngineConfig& config, const Model& model, const Backend& backend, StructuredOutputs& structured)
      : config_(config), model_(model), backend_(backend), structured_(structured) {}

  // Before the forward: sets the request's want_logits, sampling, penalty_tokens and token_mask.
  void prepare(const StepPlan& plan, StepRequest& out);
  // After the forward: the token of each sampling row of the plan, then of each forked sample (a child
  // with its parent's logits row). A score request's sequence gets its score from its raw row.
  void sample(const StepPlan& plan, const std::vector<std::pair<Sequence*, int32_t>>& forked, const StepRequest& request,
              StepResult& out, LogprobSteps& logprobs);

  const std::vector<Sequence*>& rows() const { return rows_; }      // (sampled tokens) their sequences
  const std::vector<int32_t>& tokens() const { return sampled_; }   // (sampled tokens)
  // No token can continue row `row`'s constraint: it ends there (as at max_tokens).
  bool is_blocked(size_t row) const { return row < blocked_.size() && blocked_[row]; }
  int constrained_rows() const { return constrained_rows_; }        // this step's rows under a constraint
  double mask_ms() const { return mask_ms_; }                       // and the time their masks took

 private:
  void draw(int64_t num_rows, int vocab);

  const EngineConfig& config_;
  const Model& model_;
  const Backend& backend_;
  StructuredOutputs& structured_;
  std::unique_ptr<ThreadPool> pool_;    // made at the first step that samples several rows
  std::vector<Sequence*> rows_;         // (tokens sampled this step) their sequences
  std::vector<int32_t> logits_row_;     // (tokens sampled this step) the logits row each draws from
  std::vector<float*> row_logits_;      // (tokens sampled this step) the logits row each draw uses
  std::vector<bool> blocked_;           // (tokens sampled this step) its constraint allows no token
  std::vector<float> fork_logits_;      // (samples forked this step, vocab) copies of their parent's row
  std::vector<int32_t> sampled_;        // (tokens sampled this step) their next tokens
  std::vector<int32_t> penalty_slot_;   // (vocab) scratch of append_penalty_tokens, all -1
  int constrained_rows_ = 0;
  double mask_ms_ = 0;
};

}  // namespace cbatch
