// A host backend's answers to StepRequest::logprob_queries (split as logprob_split.hpp says): rows the
// step already has are reduced from StepResult::logits with the ids in StepResult::token_ids; the others
// get their logits from `head`, a chunk at a time, each chunk reduced at once. Rows are reduced in
// parallel on the pool.
#pragma once
#include <cstdint>
#include <functional>

#include "engine/backend/backend.hpp"
#include "engine/base/thread_pool.hpp"

namespace cbatch {

// head(rows, n, logits): the (n, vocab) final logits of batch rows rows[0..n), n <= logprob_chunk_rows(vocab).
using LogitsHead = std::function<void(const int32_t* rows, int n, float* logits)>;

void answer_logprob_queries(const RaggedBatch& batch, int vocab, const LogitsHead& head, ThreadPool& pool,
                            const StepRequest& request, StepResult& out);

}  // namespace cbatch
