// Which sequences of a step take the chunked delta rule (deltanet_chunked.hpp) and its chunks
// (DeltaNetChunks, deltanet_shape.hpp), cut on the host from the step's rows: a sequence with at least
// min_rows real rows is chunked, its real rows in chunks of kDeltaNetChunk from its first row (the last one
// shorter), then its padding rows the same way, so that a chunk ends where the state is stored.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "cuda/recurrent/deltanet_shape.hpp"

namespace cbatch {

struct DeltaNetChunkPlan {
  std::vector<int32_t> chunked;     // (num_seqs) 1: chunked, 0: token by token
  std::vector<int32_t> seq;         // (num_chunked_seqs) their indices in the step
  std::vector<int32_t> seq_chunks;  // (num_chunked_seqs + 1) their chunks' ranges
  std::vector<int32_t> rows;        // (num_chunks, 2) first row, row count

  int num_chunked_seqs() const { return static_cast<int>(seq.size()); }
  int num_chunks() const { return static_cast<int>(rows.size() / 2); }
};

// Chunks rows [from, to) into plan.rows.
inline void append_chunks(DeltaNetChunkPlan& plan, int32_t from, int32_t to) {
  for (int32_t first = from; first < to; first += deltanet_detail::kDeltaNetChunk) {
    plan.rows.push_back(first);
    plan.rows.push_back(std::min(to - first, deltanet_detail::kDeltaNetChunk));
  }
}

// begin (num_seqs + 1) and real (num_seqs) as DeltaNetSeqs holds them; min_rows >= 1.
inline DeltaNetChunkPlan plan_deltanet_chunks(const int32_t* begin, const int32_t* real, int num_seqs, int min_rows) {
  DeltaNetChunkPlan plan;
  plan.chunked.assign(static_cast<size_t>(num_seqs), 0);
  plan.seq_chunks.push_back(0);
  for (int s = 0; s < num_seqs; ++s) {
    if (real[s] < std::max(min_rows, 1)) continue;
    plan.chunked[static_cast<size_t>(s)] = 1;
    plan.seq.push_back(s);
    append_chunks(plan, begin[s], begin[s] + real[s]);
    append_chunks(plan, begin[s] + real[s], begin[s + 1]);
    plan.seq_chunks.push_back(plan.num_chunks());
  }
  return plan;
}

// The most chunks a step of max_tokens rows and max_seqs sequences cuts: a short chunk at most at the end
// of each sequence's real rows and of its padding rows.
inline int64_t max_deltanet_chunks(int max_tokens, int max_seqs) {
  return max_tokens / deltanet_detail::kDeltaNetChunk + 2 * static_cast<int64_t>(max_seqs);
}

}  // namespace cbatch
