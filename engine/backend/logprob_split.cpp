#include "engine/backend/logprob_split.hpp"

#include <string>

#include "engine/base/error.hpp"

namespace cbatch {
namespace {

[[noreturn]] void bad_query(const LogprobQuery& query, const std::string& why) {
  throw Error("internal error: logprob query of row " + std::to_string(query.row) + " (k " + std::to_string(query.k) +
              ", target " + std::to_string(query.target) + "): " + why);
}

// The index among the step's logits rows of a query that asks the row's own token (target -1).
size_t logits_index(const RaggedBatch& batch, const StepRequest& request, const LogprobQuery& query) {
  const auto it = std::lower_bound(batch.logits_rows.begin(), batch.logits_rows.end(), query.row);
  const size_t j = static_cast<size_t>(it - batch.logits_rows.begin());
  if (it == batch.logits_rows.end() || *it != query.row || request.want_logits) {
    bad_query(query, "the row has no sampled token");
  }
  return j;
}

}  // namespace

LogprobQuerySplit split_logprob_queries(const RaggedBatch& batch, int vocab, const StepRequest& request) {
  LogprobQuerySplit split;
  for (size_t q = 0; q < request.logprob_queries.size(); ++q) {
    const LogprobQuery& query = request.logprob_queries[q];
    if (query.row < 0 || query.row >= batch.num_tokens()) bad_query(query, "outside the batch");
    if (query.k < 0 || query.k > request.logprob_width || query.target >= vocab) bad_query(query, "out of range");
    if (query.target >= 0) {
      split.computed.push_back(q);
    } else {
      split.sampled.emplace_back(q, logits_index(batch, request, query));
    }
  }
  return split;
}

}  // namespace cbatch
