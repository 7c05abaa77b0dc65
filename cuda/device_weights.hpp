// The model's weights on the device, in the compute dtype T (norm weights, biases and RoPE frequencies
// fp32; norm weights with the family's norm_offset added, as the CPU backend adds it). Q, K, V are fused
// into one (q_dim + 2 kv_dim, dim) matrix (their biases likewise) and gate, up into one (2 hidden, dim)
// matrix, so each needs one GEMM. A tied lm_head is the embedding buffer itself. The family's optional
// tensors are empty buffers where the model has none. With fp8 weights the four linear weights of each layer
// are FP8 E4M3 with one scale each (linear.hpp); the embedding and lm_head stay in T, as in vLLM. A sparse
// layer has its router and experts (MoeLayerWeights) instead of the dense gate|up and down.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <vector>

#include "cuda/device_buffer.hpp"
#include "cuda/linear.hpp"
#include "cuda/moe_quant_gemm.hpp"
#include "engine/model/model.hpp"

namespace cbatch {

// A sparse layer's FFN: the router and every expert stacked in one buffer per product, so that expert e's
// matrix is at e * its size. The experts stay quantized where moe_quant_gemm multiplies them (T bf16 or
// fp16): in MXFP4 or Q8_0 blocks where the model ships them so, in FP8 with a scale per row with fp8
// weights; else (other GGUF blocks decoded at load like the dense weights, fp32, moe-experts=dequant)
// in T. Biases fp32.
template <typename T>
struct MoeLayerWeights {
  DeviceBuffer<T> router;               // (num_experts, dim)
  ExpertMatrix<T> gate_up;              // (num_experts, 2 * expert_hidden, dim): each expert's gate rows, then up
  ExpertMatrix<T> down;                 // (num_experts, dim, expert_hidden)
  LinearWeight<T> shared_gate_up;       // (2 * shared_hidden, dim); empty without a shared expert
  LinearWeight<T> shared_down;          // (dim, shared_hidden)
  DeviceBuffer<float> shared_gate;      // (dim) the shared expert's sigmoid gate; empty without one
  // gpt-oss's biases (ModelConfig::router_bias, expert_bias); empty without them.
  DeviceBuffer<float> router_bias;      // (num_experts)
  DeviceBuffer<float> gate_up_bias;     // (num_experts, 2 * expert_hidden) [gate | up]
  DeviceBuffer<float> down_bias;        // (num_experts, dim)

  bool has_shared() const { return shared_gate.size() > 0; }
  size_t bytes() const {
    return router.bytes() + gate_up.bytes() + down.bytes() + shared_gate_up.bytes() + shared_down.bytes() +
           shared_gate.bytes() + router_bias.bytes() + gate_up_bias.bytes() + down_bias.bytes();
  }
};

template <typename T>
struct LayerWeights {
  DeviceBuffer<float> attn_norm;       // (dim)
  LinearWeight<T> wqkv;               // (q_dim + 2 * kv_dim, dim): rows of wq, then wk, then wv
  DeviceBuffer<float> qkv_bias;        // (q_dim + 2 * kv_dim): bq, bk, bv; empty without qkv_bias
  DeviceBuffer<float> q_norm;          // (head_dim); empty without qk_norm
  DeviceBuffer<float> k_norm;          // (head_dim); empty without qk_norm
  LinearWeight<T> wo;                  // (dim, q_dim)
  DeviceBuffer<float> o_bias;          // (dim); empty without o_bias
  DeviceBuffer<float> sinks;           // (num_heads) attention sink logits; empty without attn_sinks
  DeviceBuffer<float> post_attn_norm;  // (dim); empty without sandwich_norms
  DeviceBuffer<float> ffn_norm;        // (dim)
  LinearWeight<T> w_gate_up;           // (2 * hidden_dim, dim): rows of w_gate, then w_up; empty if sparse
  LinearWeight<T> w_down;              // (dim, hidden_dim); empty if sparse
  MoeLayerWeights<T> moe;              // the experts of a sparse layer (ModelConfig::is_sparse); else empty
  DeviceBuffer<float> post_ffn_norm;   // (dim); empty without sandwich_norms
};

// Which RoPE table a row of a layer uses: the layer's base (local: Gemma 3's windowed layers) and, for
// longrope, whether the row's position is at or past original_max_position.
enum RopeTable : int { kRopeGlobal = 0, kRopeLocal = 1, kRopeLongRange = 2, kNumRopeTables = 4 };

template <typename T>
struct DeviceWeights {
  DeviceBuffer<T> embedding;          // (vocab, dim)
  std::vector<LayerWeights<T>> layers;
  DeviceBuffer<float> final_norm;     // (dim)
  DeviceBuffer<T> untied_lm_head;     // (vocab, dim); empty when the lm_head is tied to the embedding
  DeviceBuffer<float> rope_inv_freq;  // (kNumRopeTables, head_dim / 2) from rope_inv_freq(config, .., local, long)

  const T* lm_head() const { return untied_lm_head.size() > 0 ? untied_lm_head.get() : embedding.get(); }
  // Table `set` (RopeTable bits) of rope_inv_freq; every set is filled, a model reads those it uses.
  const float* rope_table(int set) const {
    return rope_inv_freq.get() + static_cast<size_t>(set) * (rope_inv_freq.size() / kNumRopeTables);
  }
  size_t bytes() const;
};

// Converts and uploads every tensor (host tensors in bounded chunks through fp32, random tensors
// generated on the device). Checks each tensor's shape against the config; throws cbatch::Error.
// Returns after the stream is idle. fp8_weights: the layers' linear weights quantized to FP8 (T bf16 or
// fp16), the experts to FP8 with a scale per row; a weight whose shape cuBLASLt's FP8 GEMM (an expert's:
// moe_quant_gemm, k a multiple of 32) cannot take, or that holds a NaN or an infinity, is refused with its
// tensor's name. keep_quantized = false (--cuda-kernel moe-experts=dequant) keeps every expert in T (the
// cuBLAS path, to compare).
template <typename T>
DeviceWeights<T> upload_weights(const Model& model, cudaStream_t stream, bool fp8_weights = false,
                                bool keep_quantized = true);

}  // namespace cbatch
