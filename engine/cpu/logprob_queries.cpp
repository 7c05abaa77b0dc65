#include "engine/cpu/logprob_queries.hpp"

#include <algorithm>

#include "engine/base/error.hpp"
#include "engine/backend/logprob_split.hpp"

namespace cbatch {
namespace {

void reduce_query(int k, StepResult& out, size_t q, const float* logits, int vocab, int32_t target) {
  LogprobAnswers& a = out.logprobs;
  const size_t top = q * static_cast<size_t>(a.width);
  a.target_logprob[q] = reduce_logprob_row(logits, vocab, k, target, a.top_ids.data() + top,
                                           a.top_logprobs.data() + top);
}

}  // namespace

void answer_logprob_queries(const RaggedBatch& batch, int vocab, const LogitsHead& head, ThreadPool& pool,
                            const StepRequest& request, StepResult& out) {
  const LogprobQuerySplit split = split_logprob_queries(batch, vocab, request);
  out.logprobs.resize(request.logprob_queries.size(), request.logprob_width);
  if (!split.sampled.empty() && out.token_ids.size() != batch.logits_rows.size()) {
    throw Error("internal error: logprob queries of sampled rows, but " + std::to_string(out.token_ids.size()) +
                " token ids for " + std::to_string(batch.logits_rows.size()) + " rows");
  }
  pool.parallel_for(static_cast<int64_t>(split.sampled.size()), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const auto [q, j] = split.sampled[static_cast<size_t>(i)];
      reduce_query(request.logprob_queries[q].k, out, q, &out.logits[j * static_cast<size_t>(vocab)], vocab, out.token_ids[j]);
    }
  });
  const std::vector<size_t>& computed = split.computed;
  const size_t chunk = static_cast<size_t>(logprob_chunk_rows(vocab));
  std::vector<int32_t> rows(chunk);
  std::vector<float> logits(std::min(chunk, computed.size()) * vocab);
  for (size_t c = 0; c < computed.size(); c += chunk) {
    const int n = static_cast<int>(std::min(chunk, computed.size() - c));
    for (int i = 0; i < n; ++i) rows[static_cast<size_t>(i)] = request.logprob_queries[computed[c + static_cast<size_t>(i)]].row;
    head(rows.data(), n, logits.data());
    pool.parallel_for(n, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const size_t q = computed[c + static_cast<size_t>(i)];
        const LogprobQuery& query = request.logprob_queries[q];
        reduce_query(query.k, out, q, &logits[static_cast<size_t>(i) * vocab], vocab, query.target);
      }
    });
  }
}

}  // namespace cbatch
