// The engine's side of logprobs (engine/sample/logprobs.hpp), step by step. Before the forward it asks
// the backend for the prompt rows of requests with prompt_logprobs (each row predicts the next prompt
// token, so a chunk's last row scores the next chunk's first token) and, when the backend returns token
// ids rather than logits, for the sampling rows of requests with logprobs; the backend reduces each row to
// k values. After the forward it stores the prompt entries in their sequences (a row scored before a
// preemption is not stored again), and turns each sampled token into its entry: from the backend's
// answer, or from the raw logits row the host kept before masks and penalties changed it.
// Steps without such requests do nothing here.
#pragma once
#include <vector>

#include "engine/base/request_result.hpp"
#include "engine/backend/backend.hpp"
#include "engine/core/step_plan.hpp"
#include "engine/text/tokenizer.hpp"

namespace cbatch {

class LogprobSteps {
 public:
  LogprobSteps(const Tokenizer& tokenizer, int vocab) : tokenizer_(tokenizer), vocab_(vocab) {}

  // Whether a sampling row of the plan asks logprobs (a backend that answers no queries then returns logits).
  static bool any_sampling_row(const StepPlan& plan);
  // Before forward, after StepRequest::want_logits is decided: the step's queries.
  void add_queries(const StepPlan& plan, const RaggedBatch& batch, StepRequest& out);
  // After forward: prompt entries into their sequences.
  void store_prompt(const StepRequest& request, const StepResult& out) const;
  // Host sampling: copies the raw logits row of each sampling row that asks logprobs (before masks).
  void keep_raw_rows(const std::vector<Sequence*>& rows, const std::vector<float*>& logits);
  // After sampling: the entry of each sampling row's token (rows are the engine's sampling rows).
  void make_generated(const std::vector<Sequence*>& rows, const std::vector<int32_t>& sampled, const StepRequest& request,
                      const StepResult& out);
  // Row `row`'s entry, moved into its sequence; nothing for rows that ask none.
  void append_generated(size_t row, Sequence& seq);

 private:
  struct PromptQuery {
    Sequence* seq;
    int position;  // the row's position; it scores tokens[position + 1]
  };
  void add_prompt_queries(const StepPlan& plan, const RaggedBatch& batch, StepRequest& out);
  void add_sampling_queries(const StepPlan& plan, const RaggedBatch& batch, StepRequest& out);
  TokenLogprob entry(int32_t prev, int32_t id, float logprob, int k, const int32_t* top_ids, const float* top_lps) const;
  std::string shown_piece(int32_t prev, int32_t id) const;

  const Tokenizer& tokenizer_;
  int vocab_;
  std::vector<PromptQuery> prompt_queries_;   // (prompt queries) the first queries of the step
  std::vector<int32_t> sampling_query_;       // (sampling rows of the plan) their query, or -1
  std::vector<int32_t> raw_index_;            // (sampling rows) their kept raw row, or -1
  std::vector<float> raw_rows_;               // (kept rows, vocab)
  std::vector<bool> has_entry_;               // (sampling rows) whether generated_[row] is set
  std::vector<TokenLogprob> generated_;       // (sampling rows)
  std::vector<int32_t> top_ids_;              // (k) scratch
  std::vector<float> top_lps_;                // (k) scratch
};

}  // namespace cbatch
