// A host backend's answers to StepOutput::logprob_queries: rows whose logits the step already computed
// (sampling rows, target -1: the row's token id) are reduced from StepOutput::logits; every other row gets
// its logits from `head` in chunks of logprob_chunk_rows(vocab) rows, each chunk reduced at once, so memory
// stays under 32 MB of logits whatever the prompt length and vocabulary (the head's matmul is faster on
// more rows, up to 256). Rows are reduced in parallel on the pool.
#pragma once
#include <algorithm>
#include <cstdint>
#include <functional>

#include "engine/core/backend.hpp"
#include "engine/cpu/thread_pool.hpp"

namespace cbatch {

inline int logprob_chunk_rows(int vocab) {
  constexpr int kChunkFloats = 8 << 20, kMaxRows = 256;
  return vocab >= kChunkFloats ? 1 : std::min(kMaxRows, kChunkFloats / vocab);
}

// head(rows, n, logits): the (n, vocab) final logits of batch rows rows[0..n), n <= logprob_chunk_rows(vocab).
using LogitsHead = std::function<void(const int32_t* rows, int n, float* logits)>;

void answer_logprob_queries(const RaggedBatch& batch, int vocab, const LogitsHead& head, ThreadPool& pool,
                            StepOutput& out);

}  // namespace cbatch
