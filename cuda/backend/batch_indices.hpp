// One step's index arrays on the device. The host checks the RaggedBatch against the backend's limits
// (so no kernel can index out of bounds), packs every array into one pinned buffer and enqueues a single
// host-to-device copy; BatchIndices then points into the device copy.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "cuda/common/device_buffer.hpp"
#include "cuda/lora/lora_layout.hpp"
#include "engine/backend/ragged_batch.hpp"

namespace cbatch {

// Distinct sliding windows (0 = none counts as one) a model's layers may have: each needs its own key
// tiles of the decode rows (decode_stream.hpp).
constexpr int kMaxWindowKinds = 4;

struct BatchIndices {
  const int32_t* tokens = nullptr;        // (num_tokens)
  const int32_t* positions = nullptr;     // (num_tokens)
  const int32_t* slots = nullptr;         // (num_kv_groups, num_tokens)
  const int32_t* query_start = nullptr;   // (num_seqs + 1)
  const int32_t* logits_rows = nullptr;   // (num_logits)
  const int32_t* tile_seq = nullptr;      // (num_all_tiles) attention tiles, see paged_attention.hpp
  const int32_t* tile_row = nullptr;      // (num_all_tiles)
  const int32_t* block_tables = nullptr;  // (num_kv_groups, num_seqs, max_blocks_per_seq)
  size_t slots_stride = 0;                // num_tokens: one KV group's slots
  size_t tables_stride = 0;               // num_seqs * max_blocks_per_seq: one KV group's tables
  const int32_t* decode_seqs = nullptr;   // (num_decode) single-row sequences, for decode_attention
  // (num_decode + 1) their key tiles (decode_stream.hpp), for window kind k: the k-th of upload()'s windows
  const int32_t* decode_tile_start[kMaxWindowKinds] = {};
  int num_tiles = 0;                      // tiles of the sequences with several rows (all, without decode)
  int num_all_tiles = 0;                  // and after them, with decode, one tile per decode row (decode_seqs'
                                          // order): for the layers the decode kernel does not take
  int num_decode = 0;
  int decode_tiles[kMaxWindowKinds] = {};  // decode_tile_start[k][num_decode]: key tiles per kv head
  const LoraTile* lora_tiles = nullptr;   // (num_lora_tiles) the rows of LoRA adapters (lora_layout.hpp)
  int num_lora_tiles = 0;

  // A KV group's slots and block tables (a layer reads its group's, kv_groups.hpp).
  const int32_t* group_slots(int group) const { return slots + static_cast<size_t>(group) * slots_stride; }
  const int32_t* group_tables(int group) const { return block_tables + static_cast<size_t>(group) * tables_stride; }
};

struct BatchLimits {
  int max_tokens = 0;          // rows
  int max_seqs = 0;            // sequences, and sampling rows
  int max_blocks_per_seq = 0;  // block table width
  int vocab_size = 0;
  int num_blocks = 0;          // KV cache blocks
  int block_size = 0;
  int num_loras = 0;           // LoRA adapters loaded: RaggedBatch::lora_ids are in [0, num_loras]
  std::vector<int> group_windows{0};  // (KV groups) each group's window, 0 = full (kv_groups.hpp)
};

// Throws cbatch::Error naming the first inconsistency: sizes over the limits, token ids outside the
// vocabulary, query_start not a partition of the rows, positions whose blocks are not valid cache blocks (in
// every KV group: a windowed group's from the first block its rows' windows read), slots that disagree with
// their group's block table, logits rows not ascending, LoRA ids never loaded.
void validate_batch(const RaggedBatch& batch, const BatchLimits& limits);

class BatchUploader {
 public:
  BatchUploader() = default;
  explicit BatchUploader(const BatchLimits& limits);

  // int32 elements the buffers hold for these limits.
  static size_t capacity(const BatchLimits& limits);
  size_t device_bytes() const { return device_.bytes(); }

  // Packs a validated batch and enqueues its copy on stream. The pinned buffer is reused by the next
  // call: the caller synchronizes the stream in between. With split_decode, single-row sequences go to
  // the decode list (and to one tile each, after the other tiles: num_all_tiles), and their key tiles are
  // listed for each of `windows` (at most kMaxWindowKinds; the model's distinct layer windows, 0 for none).
  BatchIndices upload(const RaggedBatch& batch, int rows_per_tile, bool split_decode, cudaStream_t stream,
                      const std::vector<int>& windows = {0});

 private:
  std::vector<int32_t> row_lora_;  // (num_tokens) this step's adapter of each row
  std::vector<LoraTile> lora_tiles_;
  PinnedBuffer<int32_t> host_;    // (capacity)
  DeviceBuffer<int32_t> device_;  // (capacity)
};

}  // namespace cbatch
