// A hybrid model's recurrent layers on the CUDA backend (cuda_forward.hpp, step_recurrent.cpp): the state
// slots in device memory and the buffers of the recurrent kinds' steps. A slot holds, for each recurrent
// layer in order, its conv window ((conv_kernel - 1, channels) fp32) then its recurrent matrices (DeltaNet:
// (num_v_heads, k_head_dim, v_head_dim), Mamba-2: (heads, head_dim, state_size) fp32; a short conv has none),
// as the CPU's state cache lays them out (ModelConfig::layer_state). The step buffers are shared by the kinds
// (a layer's steps end before the next layer's begin), each as wide as the widest kind present needs. With
// the chunked delta rule (--cuda-kernel deltanet=chunked) the DeltaNet layers also have its workspace and the
// step's chunk plan (deltanet_chunk_plan.hpp), cut once a step and read by every DeltaNet layer.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "cuda/common/device_buffer.hpp"
#include "cuda/recurrent/deltanet_chunk_plan.hpp"
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
  RecurrentStates(const ModelConfig& c, int max_tokens, int max_seqs, bool chunked_deltanet)
      : dims(c.deltanet), mamba(c.mamba) {
    RecurrentWidths w;
    bool has_deltanet = false;
    for (int l = 0; l < c.num_layers; ++l) {
      has_deltanet = has_deltanet || c.layer_kind(l) == LayerKind::kDeltaNet;
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
    if (has_deltanet && chunked_deltanet) allocate_chunked(max_tokens, max_seqs);
  }

  // The chunked delta rule's workspace and plan buffers.
  void allocate_chunked(int max_tokens, int max_seqs) {
    chunked = true;
    const size_t heads = static_cast<size_t>(max_tokens) * dims.num_v_heads;
    chunk_w = DeviceBuffer<float>(heads * dims.k_head_dim);
    chunk_u = DeviceBuffer<float>(heads * dims.v_head_dim);
    chunk_scores = DeviceBuffer<float>(heads * deltanet_detail::kDeltaNetChunk);
    chunk_log_decay = DeviceBuffer<float>(heads);
    const size_t plan_ints = 3 * static_cast<size_t>(max_seqs) + 1 + 2 * max_deltanet_chunks(max_tokens, max_seqs);
    chunk_plan = DeviceBuffer<int32_t>(plan_ints);
    host_chunk_plan = PinnedBuffer<int32_t>(plan_ints);
  }

  deltanet_detail::DeltaNetChunkWork chunk_work() const {
    return {chunk_w.get(), chunk_u.get(), chunk_scores.get(), chunk_log_decay.get()};
  }

  int64_t slot_floats() const { return slot_floats_; }
  int64_t slot_bytes() const { return slot_floats() * static_cast<int64_t>(sizeof(float)); }
  size_t device_bytes() const {
    return proj.bytes() + side.bytes() + conv_out.bytes() + gates.bytes() + core.bytes() + normed.bytes() +
           seq_real.bytes() + seq_slot.bytes() + chunk_w.bytes() + chunk_u.bytes() + chunk_scores.bytes() +
           chunk_log_decay.bytes() + chunk_plan.bytes();
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
  // The chunked delta rule (empty without it): its workspace (DeltaNetChunkWork), and the step's plan as
  // prepare_states uploads it: [chunked (num_seqs) | seq (n) | seq_chunks (n + 1) | rows (num_chunks, 2)],
  // n the chunked sequences, with the device views into it.
  bool chunked = false;
  DeviceBuffer<float> chunk_w;          // (max_tokens, num_v_heads, k_head_dim)
  DeviceBuffer<float> chunk_u;          // (max_tokens, num_v_heads, v_head_dim)
  DeviceBuffer<float> chunk_scores;     // (max_tokens, num_v_heads, kDeltaNetChunk)
  DeviceBuffer<float> chunk_log_decay;  // (max_tokens, num_v_heads)
  DeviceBuffer<int32_t> chunk_plan;     // (3 max_seqs + 1 + 2 max_deltanet_chunks)
  PinnedBuffer<int32_t> host_chunk_plan;  // its staging copy
  const int32_t* seq_chunked = nullptr;   // this step's chunked flags on the device, or null: none chunked
  deltanet_detail::DeltaNetChunks chunks;  // this step's chunks on the device
  int num_chunked_seqs = 0, num_chunks = 0;
  int max_seq_rows = 0;  // this step's most rows of one sequence (prepare_states): the chunked Mamba-2 scan's grid

 private:
  int64_t slot_floats_ = 0;
};

}  // namespace cbatch
