// A backend's first step in answering StepRequest::logprob_queries (backend.hpp): the queries whose rows
// are among the step's logits rows and ask the row's own token (target -1), with that logits row, and
// those whose rows need logits of their own (prompt rows), which a backend computes in chunks of
// logprob_chunk_rows(vocab) rows: at most 32 MB of logits whatever the prompt length and vocabulary
// (the head's matmul is faster on more rows, up to 256).
#pragma once
#include <algorithm>
#include <cstddef>
#include <utility>
#include <vector>

#include "engine/backend/backend.hpp"

namespace cbatch {

struct LogprobQuerySplit {
  std::vector<std::pair<size_t, size_t>> sampled;  // (query, index among batch.logits_rows)
  std::vector<size_t> computed;                    // queries with a target: logits of their own
};

// Throws an internal error for a query outside the batch, the vocabulary or the step's width, or one
// asking the token of a row that has none.
LogprobQuerySplit split_logprob_queries(const RaggedBatch& batch, int vocab, const StepRequest& request);

inline int logprob_chunk_rows(int vocab) {
  constexpr int kChunkFloats = 8 << 20, kMaxRows = 256;
  return vocab >= kChunkFloats ? 1 : std::min(kMaxRows, kChunkFloats / vocab);
}

}  // namespace cbatch
