// The layouts the recurrent kernels (deltanet.hpp, short_conv.hpp, mamba2.hpp) share with the backend that fills
// them, apart from the block code so that host files can include them: the step's sequences and a layer's
// state slots. The layers' sizes are the engine's own (engine/model/recurrent_sizes.hpp: DeltaNetSizes,
// Mamba2Sizes), read on the device as they are.
#pragma once
#include <cstdint>

#include "engine/model/recurrent_sizes.hpp"

namespace cbatch::deltanet_detail {

constexpr int kMaxConvKernel = 8;  // taps a conv may have (Qwen3.5: 4)
// Rows of a chunk of the chunked Mamba-2 scan (mamba2_chunked.hpp): sequences with at least this many rows in a
// step take it, the others the token-by-token scan.
constexpr int kMambaChunkRows = 64;

// The step's sequences: rows [begin[s], begin[s + 1]), of which the first real[s] are real (padding rows
// come last: they are computed from the state but leave it as it was); slot[s] is the sequence's state slot.
// chunked[s] nonzero: the sequence's delta rule runs on the chunked kernels (deltanet_chunked.hpp) and the
// token-by-token kernel leaves it alone; null: every sequence token by token.
struct DeltaNetSeqs {
  const int32_t* begin = nullptr;    // (num_seqs + 1)
  const int32_t* real = nullptr;     // (num_seqs)
  const int32_t* slot = nullptr;     // (num_seqs)
  const int32_t* chunked = nullptr;  // (num_seqs) or null
};

// The chunked delta rule's rows (deltanet_chunk_plan.hpp cuts them): each chunked sequence's real rows in
// chunks of up to kDeltaNetChunk from its first row, then its padding rows the same way. Sequence i of the
// list is the step's sequence seq[i]; its chunks are [seq_chunks[i], seq_chunks[i + 1]), in row order;
// chunk c holds rows [rows[2 c], rows[2 c] + rows[2 c + 1]).
constexpr int kDeltaNetChunk = 64;
struct DeltaNetChunks {
  const int32_t* seq = nullptr;         // (num_chunked_seqs)
  const int32_t* seq_chunks = nullptr;  // (num_chunked_seqs + 1)
  const int32_t* rows = nullptr;        // (num_chunks, 2): first row, row count
};

// The chunked kernels' workspace, per (row, value head): W and U of the WY form, the row's decayed scores
// against its chunk's rows up to itself (zero after), and its cumulative log decay inside its chunk.
struct DeltaNetChunkWork {
  float* w = nullptr;       // (rows, num_v_heads, k_head_dim)
  float* u = nullptr;       // (rows, num_v_heads, v_head_dim)
  float* scores = nullptr;  // (rows, num_v_heads, kDeltaNetChunk)
  float* log_decay = nullptr;  // (rows, num_v_heads)
};

// A layer's states: slot s's conv window at conv + s * conv_stride ((conv_kernel - 1, conv_dim), oldest
// first) and its recurrent matrices at recurrent + s * recurrent_stride ((num_v_heads, k_head_dim,
// v_head_dim)).
struct DeltaNetStates {
  float* conv = nullptr;
  float* recurrent = nullptr;
  int64_t conv_stride = 0;
  int64_t recurrent_stride = 0;
};

}  // namespace cbatch::deltanet_detail
