// Activation buffers of one forward pass, sized once for the largest batch (max_tokens rows,
// max_seqs sampling rows) and the widest layer (Gemma 4's global layers: their own head size and K/V heads;
// a layer uses the first q_dim_of + 2 kv_dim_of values of a qkv row). T is the compute dtype; the residual
// stream and the logits stay fp32.
#pragma once
#include <cstddef>
#include <cstdint>

#include "cuda/common/device_buffer.hpp"
#include "engine/model/model_config.hpp"
#include "engine/sample/radix_sampling.hpp"

namespace cbatch {

template <typename T>
struct Workspace {
  Workspace(const ModelConfig& c, int max_tokens, int max_seqs)
      : x(rows(max_tokens) * c.dim),
        h(rows(max_tokens) * c.dim),
        qkv(rows(max_tokens) * (c.num_heads * c.max_head_dim() + 2 * c.max_kv_dim())),
        attn(rows(max_tokens) * c.num_heads * c.max_head_dim()),
        delta(rows(max_tokens) * c.dim),
        gate_up(rows(max_tokens) * 2 * c.max_hidden()),
        ffn(rows(max_tokens) * c.max_hidden()),
        gated_qkv(c.attn_output_gate ? rows(max_tokens) * (2 * c.q_dim() + 2 * c.kv_dim()) : 0),
        attn_gate(c.attn_output_gate ? rows(max_tokens) * c.q_dim() : 0),
        per_layer_in(rows(max_tokens) * c.num_layers * c.per_layer_dim),
        per_layer_gate(rows(max_tokens) * c.per_layer_dim),
        experts_in(c.experts_beside_dense ? rows(max_tokens) * c.dim : 0),
        router_in(c.experts_beside_dense ? rows(max_tokens) * c.dim : 0),
        experts_out(c.experts_beside_dense ? rows(max_tokens) * c.dim : 0),
        ffn_sum(c.experts_beside_dense ? rows(max_tokens) * c.dim : 0),
        logits(rows(max_seqs) * c.vocab_size),
        token_ids(rows(max_seqs)),
        host_token_ids(rows(max_seqs)),
        sampling(rows(max_seqs)),
        host_sampling(rows(max_seqs)) {}

  size_t device_bytes() const {
    return x.bytes() + h.bytes() + qkv.bytes() + attn.bytes() + delta.bytes() + gate_up.bytes() + ffn.bytes() +
           gated_qkv.bytes() + attn_gate.bytes() + per_layer_in.bytes() + per_layer_gate.bytes() + experts_in.bytes() +
           router_in.bytes() + experts_out.bytes() + ffn_sum.bytes() + logits.bytes() +
           token_ids.bytes() + sampling.bytes();
  }

  DeviceBuffer<float> x;          // (max_tokens, dim) residual stream
  DeviceBuffer<T> h;              // (max_tokens, dim) normed input of the next GEMM; final-normed logits rows
  DeviceBuffer<T> qkv;            // (max_tokens, q_dim_of + 2 kv_dim_of) fused projection, q rotated in place
  DeviceBuffer<T> attn;           // (max_tokens, q_dim_of) attention output
  DeviceBuffer<T> delta;          // (max_tokens, dim) output of wo or w_down, added to x by the next norm
  DeviceBuffer<T> gate_up;        // (max_tokens, 2 max_hidden) fused gate|up projection (a layer's own width)
  DeviceBuffer<T> ffn;            // (max_tokens, max_hidden) SwiGLU output
  DeviceBuffer<T> gated_qkv;      // (max_tokens, 2 q_dim + 2 kv_dim) an output-gated projection (Qwen3.5), or empty
  DeviceBuffer<T> attn_gate;      // (max_tokens, q_dim) its gates, or empty
  // Gemma 4's per-layer inputs (empty without them): the step's inputs of every layer, first the per-layer
  // model projection of the embedding, and a layer's gate.
  DeviceBuffer<float> per_layer_in;  // (max_tokens, num_layers * per_layer_dim)
  DeviceBuffer<T> per_layer_gate;    // (max_tokens, per_layer_dim)
  // Gemma 4's MoE block beside the dense MLP (empty without it): the experts' normed input, the router's, the
  // experts' output, and the two outputs' normed sum before its rounding to T.
  DeviceBuffer<T> experts_in;        // (max_tokens, dim)
  DeviceBuffer<T> router_in;         // (max_tokens, dim)
  DeviceBuffer<T> experts_out;       // (max_tokens, dim)
  DeviceBuffer<float> ffn_sum;       // (max_tokens, dim)
  DeviceBuffer<float> logits;     // (max_seqs, vocab)
  DeviceBuffer<int32_t> token_ids;          // (max_seqs) argmax or drawn ids of the sampling rows
  PinnedBuffer<int32_t> host_token_ids;     // (max_seqs) landing place of their copy
  DeviceBuffer<RowSampling> sampling;       // (max_seqs) the sampling rows' parameters, for sample_rows
  PinnedBuffer<RowSampling> host_sampling;  // (max_seqs) their staging copy

 private:
  static size_t rows(int n) { return static_cast<size_t>(n); }
};

}  // namespace cbatch
