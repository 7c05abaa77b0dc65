// The CPU backend's recurrent-state slots (cpu_state_cache.hpp).
#include "engine/cpu/cpu_state_cache.hpp"

#include <cstring>

namespace cbatch {

CpuStateCache::CpuStateCache(const ModelConfig& c) {
  for (int l = 0; l < c.num_layers; ++l) {
    const bool recurrent = c.is_recurrent(l);
    const LayerState state = c.layer_state(l);
    layer_offset_.push_back(recurrent ? slot_floats_ : -1);
    conv_floats_.push_back(state.conv_floats);
    if (recurrent) slot_floats_ += state.conv_floats + state.recurrent_floats;
  }
}

void CpuStateCache::allocate(int num_slots) {
  num_slots_ = num_slots;
  data_ = calloc_bytes(static_cast<size_t>(num_slots) * static_cast<size_t>(slot_bytes()), "recurrent state slots");
}

float* CpuStateCache::at(int32_t slot, int layer) {
  const int64_t offset = layer_offset_[static_cast<size_t>(layer)];
  if (slot < 0 || slot >= num_slots_ || offset < 0) {
    throw Error("internal error: state slot " + std::to_string(slot) + " of layer " + std::to_string(layer) +
                " outside the state cache");
  }
  return reinterpret_cast<float*>(data_.get()) + slot * slot_floats_ + offset;
}

void CpuStateCache::prepare(const RaggedBatch& batch) {
  if (slot_floats_ == 0) return;
  float* base = reinterpret_cast<float*>(data_.get());
  const size_t bytes = static_cast<size_t>(slot_bytes());
  for (int c = 0; c < batch.num_state_copies(); ++c) {
    const int32_t src = batch.state_copies[2 * c], dst = batch.state_copies[2 * c + 1];
    if (src < 0 || dst < 0 || src >= num_slots_ || dst >= num_slots_) {
      throw Error("state copy " + std::to_string(src) + " -> " + std::to_string(dst) + " outside the state cache");
    }
    std::memcpy(base + dst * slot_floats_, base + src * slot_floats_, bytes);
  }
  for (int s = 0; s < batch.num_seqs(); ++s) {
    const int first = batch.query_start[s];
    const bool starts = first < batch.query_start[s + 1] && batch.positions[first] == 0 && batch.slot_mapping[first] >= 0;
    if (!starts) continue;
    const int32_t slot = batch.state_slots[static_cast<size_t>(s)];
    if (slot < 0 || slot >= num_slots_) throw Error("internal error: a sequence of a hybrid model without a state slot");
    std::memset(base + slot * slot_floats_, 0, bytes);
  }
}

}  // namespace cbatch
