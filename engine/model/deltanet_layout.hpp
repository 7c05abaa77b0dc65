// Where a gated DeltaNet layer's projection rows sit in Qwen3-Next's files, grouped by key head
// (DeltaNetSizes::grouped_qkvz, grouped_ba), against the standard order the forward passes read (Qwen3.5's:
// [q|k|v | z] and [b | a], value head j's channels at j * v_head_dim). One description, read by the CPU
// backend (which puts each product's values in the standard order after the product) and by the CUDA upload
// (which puts the weight rows in the standard order once, so that its forward is Qwen3.5's). And the two
// orders of Qwen3.5's value heads (Hugging Face's, grouped by key head, and llama.cpp's tiled one), which a
// LoRA adapter's rows are put in from one to the other at load (lora_adapter.cpp).
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "engine/model/model_config.hpp"

namespace cbatch {

// Rows [first, first + count) of the standard order are rows [source, source + count) of the stored order.
struct RowRun {
  int64_t first = 0;
  int64_t source = 0;
  int64_t count = 0;
};

// The runs of in_proj_qkvz ((conv_dim + value_dim) rows), stored per key head kh as [q (k_head_dim) |
// k (k_head_dim) | v (its value heads) | z (its value heads)], in standard-order position.
std::vector<RowRun> grouped_qkvz_runs(const DeltaNetSizes& d);
// The runs of in_proj_ba ((2 * num_v_heads) rows), stored per key head as [b (its value heads) | a (its value
// heads)].
std::vector<RowRun> grouped_ba_runs(const DeltaNetSizes& d);

// Value head h of the `to_tiled` order is value head sources[h] of the `from_tiled` order (tiled: head
// g = j * num_k_heads + kh is Hugging Face's kh * (num_v_heads / num_k_heads) + j, as llama.cpp's converter
// writes Qwen3.5's GGUF; identity when the orders agree or there are as many value heads as key heads).
std::vector<int32_t> value_head_sources(const DeltaNetSizes& d, bool from_tiled, bool to_tiled);

// standard[i] = stored[order[i]] for each of `width` values: the runs spelled out value by value.
std::vector<int32_t> standard_order(const std::vector<RowRun>& runs, int64_t width);

// Each of `rows` rows of order.size() values at values put in the standard order, in place (the CPU backend's
// reading of a grouped product's output).
void reorder_values(float* values, int64_t rows, const std::vector<int32_t>& order);

// Rows of row_bytes bytes put in the standard order: copy(dst_offset, src_offset, bytes) for each run, offsets
// in bytes from the standard and the stored tensor's start. A row of a block type is whole blocks, so rows of
// blocks move as any other rows; the CUDA upload copies device rows of its compute type this way.
void copy_row_runs(const std::vector<RowRun>& runs, int64_t row_bytes,
                   const std::function<void(int64_t dst_offset, int64_t src_offset, int64_t bytes)>& copy);

}  // namespace cbatch
