#include "engine/cpu/logprob_queries.hpp"

#include <algorithm>

#include "engine/core/error.hpp"

namespace cbatch {
namespace {

void reduce_query(StepOutput& out, size_t q, const float* logits, int vocab, int32_t target) {
  LogprobAnswers& a = out.logprobs;
  const size_t top = q * static_cast<size_t>(a.width);
  a.target_logprob[q] = reduce_logprob_row(logits, vocab, out.logprob_queries[q].k, target, &a.top_ids[top],
                                           &a.top_logprobs[top]);
}

[[noreturn]] void bad_query(const LogprobQuery& query, const std::string& why) {
  throw Error("internal error: logprob query of row " + std::to_string(query.row) + " (k " + std::to_string(query.k) +
              ", target " + std::to_string(query.target) + "): " + why);
}

// The index among the step's logits rows of a query that asks the row's own token (target -1).
size_t logits_index(const RaggedBatch& batch, const StepOutput& out, const LogprobQuery& query) {
  const auto it = std::lower_bound(batch.logits_rows.begin(), batch.logits_rows.end(), query.row);
  const size_t j = static_cast<size_t>(it - batch.logits_rows.begin());
  if (it == batch.logits_rows.end() || *it != query.row || j >= out.token_ids.size()) {
    bad_query(query, "the row has no sampled token");
  }
  return j;
}

}  // namespace

void answer_logprob_queries(const RaggedBatch& batch, int vocab, const LogitsHead& head, ThreadPool& pool,
                            StepOutput& out) {
  const std::vector<LogprobQuery>& queries = out.logprob_queries;
  out.logprobs.resize(queries.size(), out.logprob_width);
  std::vector<size_t> computed;  // queries whose rows need logits of their own
  std::vector<std::pair<size_t, size_t>> sampled;  // (query, logits row) of rows the step already has
  for (size_t q = 0; q < queries.size(); ++q) {
    const LogprobQuery& query = queries[q];
    if (query.row < 0 || query.row >= batch.num_tokens()) bad_query(query, "outside the batch");
    if (query.k < 0 || query.k > out.logprob_width || query.target >= vocab) bad_query(query, "out of range");
    if (query.target >= 0) {
      computed.push_back(q);
    } else {
      sampled.emplace_back(q, logits_index(batch, out, query));
    }
  }
  pool.parallel_for(static_cast<int64_t>(sampled.size()), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const auto [q, j] = sampled[static_cast<size_t>(i)];
      reduce_query(out, q, &out.logits[j * static_cast<size_t>(vocab)], vocab, out.token_ids[j]);
    }
  });
  const size_t chunk = static_cast<size_t>(logprob_chunk_rows(vocab));
  std::vector<int32_t> rows(chunk);
  std::vector<float> logits(std::min(chunk, computed.size()) * vocab);
  for (size_t c = 0; c < computed.size(); c += chunk) {
    const int n = static_cast<int>(std::min(chunk, computed.size() - c));
    for (int i = 0; i < n; ++i) rows[static_cast<size_t>(i)] = queries[computed[c + static_cast<size_t>(i)]].row;
    head(rows.data(), n, logits.data());
    pool.parallel_for(n, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const size_t q = computed[c + static_cast<size_t>(i)];
        reduce_query(out, q, &logits[static_cast<size_t>(i) * vocab], vocab, queries[q].target);
      }
    });
  }
}

}  // namespace cbatch
