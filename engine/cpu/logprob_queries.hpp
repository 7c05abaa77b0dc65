// A host backend's answers to StepOutput::logprob_queries: rows whose logits the step already computed
// (sampling rows, target -1: the row's token id) are reduced from StepOutput::logits; every other row gets
// its logits from `head` in chunks of at most kLogprobChunkRows rows, each chunk reduced at once, so memory
// stays (chunk, vocab) floats whatever the prompt length. Rows are reduced in parallel on the pool.
#pragma once
#include <cstdint>
#include <functional>

#include "engine/core/backend.hpp"
#include "engine/cpu/thread_pool.hpp"

namespace cbatch {

inline constexpr int kLogprobChunkRows = 64;

// head(rows, n, logits): the (n, vocab) final logits of batch rows rows[0..n), n <= kLogprobChunkRows.
using LogitsHead = std::function<void(const int32_t* rows, int n, float* logits)>;

void answer_logprob_queries(const RaggedBatch& batch, int vocab, const LogitsHead& head, ThreadPool& pool,
                            StepOutput& out);

}  // namespace cbatch
