// A hybrid model's recurrent layers on the CUDA backend (cuda_forward.hpp, step_recurrent.cpp): the state
// slots in device memory and the buffers of a gated DeltaNet layer's steps. A slot holds, for each recurrent
// layer in order, its conv window ((conv_kernel - 1, conv_dim) fp32) then its recurrent matrices
// ((num_v_heads, k_head_dim, v_head_dim) fp32), as the CPU's state cache lays them out.
#pragma once
#include <cstdint>
#include <vector>

#include "cuda/common/device_buffer.hpp"
#include "cuda/recurrent/deltanet_shape.hpp"
#include "engine/model/model_config.hpp"

namespace cbatch {

// The DeltaNet kernels' view of the config's sizes (the file layouts already undone by the loader, except
// the value heads' tiling, which the kernels follow).
inline deltanet_detail::DeltaNetDims deltanet_dims(const DeltaNetSizes& d) {
  deltanet_detail::DeltaNetDims dims;
  dims.num_k_heads = d.num_k_heads;
  dims.num_v_heads = d.num_v_heads;
  dims.k_head_dim = d.k_head_dim;
  dims.v_head_dim = d.v_head_dim;
  dims.conv_kernel = d.conv_kernel;
  dims.tiled_heads = d.tiled_heads;
  return dims;
}

template <typename T>
struct RecurrentStates {
  RecurrentStates(const ModelConfig& c, int max_tokens, int max_seqs)
      : dims(deltanet_dims(c.deltanet)),
        conv_floats(static_cast<int64_t>(dims.conv_kernel - 1) * dims.conv_dim()),
        matrix_floats(static_cast<int64_t>(dims.num_v_heads) * dims.k_head_dim * dims.v_head_dim) {
    for (int l = 0; l < c.num_layers; ++l) {
      layer_index.push_back(c.is_attention(l) ? -1 : num_layers++);
    }
    if (num_layers == 0) return;
    const size_t rows = static_cast<size_t>(max_tokens);
    proj = DeviceBuffer<T>(rows * dims.proj_dim());
    ba = DeviceBuffer<T>(rows * 2 * dims.num_v_heads);
    conv_out = DeviceBuffer<float>(rows * dims.conv_dim());
    gates = DeviceBuffer<float>(rows * 2 * dims.num_v_heads);
    core = DeviceBuffer<float>(rows * dims.value_dim());
    normed = DeviceBuffer<T>(rows * dims.value_dim());
    seq_real = DeviceBuffer<int32_t>(static_cast<size_t>(max_seqs));
    seq_slot = DeviceBuffer<int32_t>(static_cast<size_t>(max_seqs));
    host_seqs = PinnedBuffer<int32_t>(2 * static_cast<size_t>(max_seqs));
  }

  int64_t slot_floats() const { return num_layers * (conv_floats + matrix_floats); }
  int64_t slot_bytes() const { return slot_floats() * static_cast<int64_t>(sizeof(float)); }
  size_t device_bytes() const {
    return proj.bytes() + ba.bytes() + conv_out.bytes() + gates.bytes() + core.bytes() + normed.bytes() +
           seq_real.bytes() + seq_slot.bytes();
  }
  // Layer l's states in every slot (l a recurrent layer).
  deltanet_detail::DeltaNetStates layer_states(int l) const {
    float* base = slots.get() + layer_index[static_cast<size_t>(l)] * (conv_floats + matrix_floats);
    return {base, base + conv_floats, slot_floats(), slot_floats()};
  }

  deltanet_detail::DeltaNetDims dims;
  int64_t conv_floats;
  int64_t matrix_floats;
  int num_layers = 0;              // recurrent layers
  std::vector<int> layer_index;    // (num_layers of the model) a layer's place among the recurrent ones, or -1
  DeviceBuffer<float> slots;       // (num_slots, slot_floats()), allocated with the KV cache
  int num_slots = 0;
  DeviceBuffer<T> proj;            // (max_tokens, proj_dim) [q|k|v | z]
  DeviceBuffer<T> ba;              // (max_tokens, 2 num_v_heads) [b | a]
  DeviceBuffer<float> conv_out;    // (max_tokens, conv_dim)
  DeviceBuffer<float> gates;       // (max_tokens, 2 num_v_heads) beta, decay factor
  DeviceBuffer<float> core;        // (max_tokens, value_dim) the delta rule's outputs
  DeviceBuffer<T> normed;          // (max_tokens, value_dim) the gated norm's, the output GEMM's input
  DeviceBuffer<int32_t> seq_real;  // (max_seqs) a step's real rows per sequence
  DeviceBuffer<int32_t> seq_slot;  // (max_seqs) its state slot per sequence
  PinnedBuffer<int32_t> host_seqs;  // (2, max_seqs) their staging copy
};

}  // namespace cbatch
