// The model's weights on the device, in the compute dtype T (norm weights and RoPE frequencies fp32).
// Q, K, V are fused into one (q_dim + 2 kv_dim, dim) matrix and gate, up into one (2 hidden, dim)
// matrix, so each needs one GEMM. A tied lm_head is the embedding buffer itself.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <vector>

#include "cuda/device_buffer.hpp"
#include "engine/model/model.hpp"

namespace cbatch {

template <typename T>
struct LayerWeights {
  DeviceBuffer<float> attn_norm;  // (dim)
  DeviceBuffer<T> wqkv;           // (q_dim + 2 * kv_dim, dim): rows of wq, then wk, then wv
  DeviceBuffer<T> wo;             // (dim, q_dim)
  DeviceBuffer<float> ffn_norm;   // (dim)
  DeviceBuffer<T> w_gate_up;      // (2 * hidden_dim, dim): rows of w_gate, then w_up
  DeviceBuffer<T> w_down;         // (dim, hidden_dim)
};

template <typename T>
struct DeviceWeights {
  DeviceBuffer<T> embedding;          // (vocab, dim)
  std::vector<LayerWeights<T>> layers;
  DeviceBuffer<float> final_norm;     // (dim)
  DeviceBuffer<T> untied_lm_head;     // (vocab, dim); empty when the lm_head is tied to the embedding
  DeviceBuffer<float> rope_inv_freq;  // (head_dim / 2)

  const T* lm_head() const { return untied_lm_head.size() > 0 ? untied_lm_head.get() : embedding.get(); }
  size_t bytes() const;
};

// Converts and uploads every tensor (host tensors in bounded chunks through fp32, random tensors
// generated on the device). Checks each tensor's shape against the config; throws cbatch::Error.
// Returns after the stream is idle.
template <typename T>
DeviceWeights<T> upload_weights(const Model& model, cudaStream_t stream);

}  // namespace cbatch
