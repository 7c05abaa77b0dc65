// A hybrid model's recurrent layers on the CUDA backend (cuda_forward.hpp, step_recurrent.cpp): the state
// slots in device memory and the buffers of the recurrent kinds' steps. A slot holds, for each recurrent
// layer in order, its conv window ((conv_kernel - 1, channels) fp32) then its recurrent matrices (DeltaNet:
// (num_v_heads, k_head_dim, v_head_dim), Mamba-2: (heads, head_dim, state_size) fp32; a short conv has none),
// as the CPU's state cache lays them out (ModelConfig::layer_state). The step buffers are shared by the kinds
// (a layer's steps end before the next layer's begin), each as wide as the widest kind present needs.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "cuda/common/device_buffer.hpp"
#include "cuda/recurrent/deltanet_shape.hpp"
#include "engine/model/model_config.hpp"

namespace cbatch {

// Widths (values per row) of the step buffers a recurrent layer kind needs.
struct RecurrentWidths {
  int64_t proj = 0;      // its in projection's output, T
  int64_t side = 0;      // a second projection's output (DeltaNet's [b | a]), T
  int64_t conv_out = 0;  // the conv's output, fp32
  int64_t gates = 0;     // per-head values, fp32
  int64_t core = 0;      // the recurrence's output, fp32
  int64_t normed = 0;    // the output GEMM's input, T
};

inline RecurrentWidths recurrent_widths(const ModelConfig& c, LayerKind kind) {
  switch (kind) {
    case LayerKind::kDeltaNet: {
      const DeltaNetSizes& d = c.deltanet;
      return {d.proj_dim(), 2 * d.num_v_heads, d.conv_dim(), 2 * d.num_v_heads, d.value_dim(), d.value_dim()};
    }
    case LayerKind::kShortConv: return {3LL * c.dim, 0, 0, 0, 0, c.dim};
    case LayerKind::kMamba2: {
      const Mamba2Sizes& m = c.mamba;
      return {m.in_proj_dim(), 0, m.conv_dim(), 0, m.inner(), m.inner()};
    }
    case LayerKind::kAttention:
    case LayerKind::kMlp: break;
  }
  return {};
}

template <typename T>
struct RecurrentStates {
  RecurrentStates(const ModelConfig& c, int max_tokens, int max_seqs)
      : dims(c.deltanet), mamba(c.mamba) {
    RecurrentWidths w;
    for (int l = 0; l < c.num_layers; ++l) {
      const LayerState state = c.layer_state(l);
      layer_offset.push_back(c.is_recurrent(l) ? slot_floats_ : -1);
      layer_conv_floats.push_back(state.conv_floats);
      if (!c.is_recurrent(l)) continue;
      slot_floats_ += state.conv_floats + state.recurrent_floats;
      ++num_layers;
      const RecurrentWidths k = recurrent_widths(c, c.layer_kind(l));
      w = {std::max(w.proj, k.proj), std::max(w.side, k.side), std::max(w.conv_out, k.conv_out),
           std::max(w.gates, k.gates), std::max(w.core, k.core), std::max(w.normed, k.normed)};
    }
    if (num_layers == 0) return;
    const size_t rows = static_cast<size_t>(max_tokens);
    proj = DeviceBuffer<T>(rows * w.proj);
    side = DeviceBuffer<T>(rows * w.side);
    conv_out = DeviceBuffer<float>(rows * w.conv_out);
    gates = DeviceBuffer<float>(rows * w.gates);
    core = DeviceBuffer<float>(rows * w.core);
    normed = DeviceBuffer<T>(rows * w.normed);
    seq_real = DeviceBuffer<int32_t>(static_cast<size_t>(max_seqs));
    seq_slot = DeviceBuffer<int32_t>(static_cast<size_t>(max_seqs));
    host_seqs = PinnedBuffer<int32_t>(2 * static_cast<size_t>(max_seqs));
  }

  int64_t slot_floats() const { return slot_floats_; }
  int64_t slot_bytes() const { return slot_floats() * static_cast<int64_t>(sizeof(float)); }
  size_t device_bytes() const {
    return proj.bytes() + side.bytes() + conv_out.bytes() + gates.bytes() + core.bytes() + normed.bytes() +
           seq_real.bytes() + seq_slot.bytes();
  }
  // Layer l's states in every slot (l a recurrent layer): its conv windows, then its matrices.
  deltanet_detail::DeltaNetStates layer_states(int l) const {
    const size_t i = static_cast<size_t>(l);
    float* base = slots.get() + layer_offset[i];
    return {base, base + layer_conv_floats[i], slot_floats(), slot_floats()};
  }

  DeltaNetSizes dims;    // the DeltaNet layers' sizes
  Mamba2Sizes mamba;    // the Mamba-2 layers' sizes
  int num_layers = 0;                    // recurrent layers
  std::vector<int64_t> layer_offset;     // (num_layers of the model) a layer's floats into a slot, or -1
  std::vector<int64_t> layer_conv_floats;  // (num_layers of the model) its conv window's floats
  DeviceBuffer<float> slots;       // (num_slots, slot_floats()), allocated with the KV cache
  int num_slots = 0;
  DeviceBuffer<T> proj;            // (max_tokens, widest in projection) DeltaNet [q|k|v | z], short conv
                                   // [B | C | x], Mamba-2 [z | x|B|C | dt]
  DeviceBuffer<T> side;            // (max_tokens, 2 num_v_heads) DeltaNet's [b | a]
  DeviceBuffer<float> conv_out;    // (max_tokens, conv channels) DeltaNet's q|k|v, Mamba-2's x|B|C after the conv
  DeviceBuffer<float> gates;       // (max_tokens, 2 num_v_heads) DeltaNet's beta and decay factor
  DeviceBuffer<float> core;        // (max_tokens, value_dim or inner) the delta rule's or the scan's outputs
  DeviceBuffer<T> normed;          // (max_tokens, value_dim, dim or inner) the output GEMM's input
  DeviceBuffer<int32_t> seq_real;  // (max_seqs) a step's real rows per sequence
  DeviceBuffer<int32_t> seq_slot;  // (max_seqs) its state slot per sequence
  PinnedBuffer<int32_t> host_seqs;  // (2, max_seqs) their staging copy

 private:
  int64_t slot_floats_ = 0;
};

}  // namespace cbatch
