#include "engine/core/logprob_steps.hpp"

#include <algorithm>

#include "engine/base/error.hpp"

namespace cbatch {

bool LogprobSteps::any_sampling_row(const StepPlan& plan) {
  return std::any_of(plan.seqs.begin(), plan.seqs.end(),
                     [](const ScheduledSeq& s) { return s.samples && s.seq->request->sampling.wants_logprobs(); });
}

void LogprobSteps::add_queries(const StepPlan& plan, const RaggedBatch& batch, StepRequest& out) {
  out.logprob_queries.clear();
  out.logprob_width = 0;
  add_prompt_queries(plan, batch, out);
  add_sampling_queries(plan, batch, out);
}

// Each prompt row not scored yet predicts the next prompt token (the last prompt row predicts a generated one).
void LogprobSteps::add_prompt_queries(const StepPlan& plan, const RaggedBatch& batch, StepRequest& out) {
  prompt_queries_.clear();
  for (size_t i = 0; i < plan.seqs.size(); ++i) {
    const ScheduledSeq& s = plan.seqs[i];
    const Sequence& seq = *s.seq;
    const int k = seq.request->sampling.prompt_logprobs;
    if (k < 0) continue;
    const int begin = std::max(seq.num_computed, seq.num_prompt_logprobs());
    const int end = std::min(seq.num_computed + s.num_tokens, seq.num_prompt_tokens - 1);
    for (int p = begin; p < end; ++p) {
      const int32_t row = batch.query_start[i] + (p - seq.num_computed);
      out.logprob_queries.push_back({row, k, seq.tokens[static_cast<size_t>(p) + 1]});
      prompt_queries_.push_back({s.seq, p});
    }
    if (begin < end) out.logprob_width = std::max(out.logprob_width, k);
  }
}

// Sampling rows whose token the backend picks (argmax or its own draw): it answers for that token.
void LogprobSteps::add_sampling_queries(const StepPlan& plan, const RaggedBatch& batch, StepRequest& out) {
  sampling_query_.clear();
  int logits_row = 0;
  for (const ScheduledSeq& s : plan.seqs) {
    if (!s.samples) continue;
    const int k = s.seq->request->sampling.logprobs;
    const bool ask = k >= 0 && !out.want_logits;
    sampling_query_.push_back(ask ? static_cast<int32_t>(out.logprob_queries.size()) : -1);
    if (ask) out.logprob_queries.push_back({batch.logits_rows[static_cast<size_t>(logits_row)], k, -1});
    if (ask) out.logprob_width = std::max(out.logprob_width, k);
    ++logits_row;
  }
}

void LogprobSteps::store_prompt(const StepRequest& request, const StepResult& out) const {
  const LogprobAnswers& a = out.logprobs;
  if (a.target_logprob.size() != request.logprob_queries.size()) {
    throw Error("internal error: the backend answered " + std::to_string(a.target_logprob.size()) + " of " +
                std::to_string(request.logprob_queries.size()) + " logprob queries");
  }
  for (size_t q = 0; q < prompt_queries_.size(); ++q) {
    Sequence& seq = *prompt_queries_[q].seq;
    const int p = prompt_queries_[q].position;
    if (!seq.prompt_logprobs) seq.prompt_logprobs = std::make_shared<std::vector<TokenLogprob>>();
    if (p != seq.num_prompt_logprobs()) {
      throw Error("internal error: prompt logprob of position " + std::to_string(p + 1) + " out of order");
    }
    const size_t top = q * static_cast<size_t>(a.width);
    seq.prompt_logprobs->push_back(entry(seq.tokens[static_cast<size_t>(p)], seq.tokens[static_cast<size_t>(p) + 1],
                                        a.target_logprob[q], request.logprob_queries[q].k, a.top_ids.data() + top,
                                        a.top_logprobs.data() + top));
  }
}

void LogprobSteps::keep_raw_rows(const std::vector<Sequence*>& rows, const std::vector<float*>& logits) {
  raw_index_.assign(rows.size(), -1);
  size_t kept = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i]->request->sampling.wants_logprobs()) raw_index_[i] = static_cast<int32_t>(kept++);
  }
  raw_rows_.resize(kept * static_cast<size_t>(vocab_));
  for (size_t i = 0; i < rows.size(); ++i) {
    if (raw_index_[i] >= 0) std::copy_n(logits[i], vocab_, &raw_rows_[static_cast<size_t>(raw_index_[i]) * vocab_]);
  }
}

void LogprobSteps::make_generated(const std::vector<Sequence*>& rows, const std::vector<int32_t>& sampled,
                                  const StepRequest& request, const StepResult& out) {
  has_entry_.assign(rows.size(), false);
  generated_.resize(rows.size());
  const LogprobAnswers& a = out.logprobs;
  for (size_t i = 0; i < rows.size(); ++i) {
    const Sequence& seq = *rows[i];
    const int k = seq.request->sampling.logprobs;
    if (k < 0) continue;
    const int32_t prev = seq.tokens.back();
    if (request.want_logits) {
      top_ids_.resize(static_cast<size_t>(k));
      top_lps_.resize(static_cast<size_t>(k));
      const float* row = &raw_rows_[static_cast<size_t>(raw_index_.at(i)) * vocab_];
      const float lp = reduce_logprob_row(row, vocab_, k, sampled[i], top_ids_.data(), top_lps_.data());
      generated_[i] = entry(prev, sampled[i], lp, std::min(k, vocab_), top_ids_.data(), top_lps_.data());
    } else {
      const size_t q = static_cast<size_t>(sampling_query_.at(i));
      const size_t top = q * static_cast<size_t>(a.width);
      generated_[i] = entry(prev, sampled[i], a.target_logprob[q], k, a.top_ids.data() + top, a.top_logprobs.data() + top);
    }
    has_entry_[i] = true;
  }
}

void LogprobSteps::append_generated(size_t row, Sequence& seq) {
  if (row < has_entry_.size() && has_entry_[row]) seq.logprobs.push_back(std::move(generated_[row]));
}

TokenLogprob LogprobSteps::entry(int32_t prev, int32_t id, float logprob, int k, const int32_t* top_ids,
                                 const float* top_lps) const {
  TokenLogprob e{id, logprob, shown_piece(prev, id), {}};
  for (int j = 0; j < k && top_ids[j] >= 0; ++j) e.top.push_back({top_ids[j], top_lps[j], shown_piece(prev, top_ids[j])});
  return e;
}

// The bytes a token adds after `prev`; a control or special token, which adds none, as its vocabulary
// text ("<|im_end|>"), as vLLM and the OpenAI API show it.
std::string LogprobSteps::shown_piece(int32_t prev, int32_t id) const {
  std::string piece = tokenizer_.decode_piece(prev, id);
  return piece.empty() ? tokenizer_.token_text(id) : piece;
}

}  // namespace cbatch
