// The CPU backend's recurrent state: per state slot (a running sequence of a hybrid model) and per recurrent
// layer, what ModelConfig::layer_state says it keeps: its conv window ((conv_kernel - 1, channels): the last
// inputs, oldest first) then its recurrent matrices (a DeltaNet's (num_v_heads, k_head_dim, v_head_dim), a
// Mamba-2's (num_heads, head_dim, state_size), row-major; a short conv has none), fp32. A slot is zeroed when its
// sequence starts (a batch row at position 0) and copied for a forked sample, before the step's layers run.
#pragma once
#include <cstdint>
#include <vector>

#include "engine/backend/ragged_batch.hpp"
#include "engine/cpu/zeroed_bytes.hpp"
#include "engine/model/model_config.hpp"

namespace cbatch {

class CpuStateCache {
 public:
  CpuStateCache() = default;
  explicit CpuStateCache(const ModelConfig& config);

  int64_t slot_bytes() const { return slot_floats_ * static_cast<int64_t>(sizeof(float)); }
  void allocate(int num_slots);

  // Layer `layer`'s conv window and recurrent matrices in slot `slot` (a recurrent layer's only).
  float* conv_window(int32_t slot, int layer) { return at(slot, layer); }
  float* recurrent(int32_t slot, int layer) { return at(slot, layer) + conv_floats_[static_cast<size_t>(layer)]; }

  // The step's state copies (RaggedBatch::state_copies), then a zero state for each sequence that starts.
  void prepare(const RaggedBatch& batch);

 private:
  float* at(int32_t slot, int layer);

  std::vector<int64_t> layer_offset_;  // (num_layers) floats into a slot; -1 for a layer without state
  std::vector<int64_t> conv_floats_;   // (num_layers) the layer's conv window's floats
  int64_t slot_floats_ = 0;
  int num_slots_ = 0;
  ZeroedBytes data_;                   // (num_slots, slot_floats) fp32
};

}  // namespace cbatch
