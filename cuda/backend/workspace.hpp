// Activation buffers of one forward pass, sized once for the largest batch (max_tokens rows,
// max_seqs sampling rows). T is the compute dtype; the residual stream and the logits stay fp32.
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
        qkv(rows(max_tokens) * (c.q_dim() + 2 * c.kv_dim())),
        attn(rows(max_tokens) * c.q_dim()),
        delta(rows(max_tokens) * c.dim),
        gate_up(rows(max_tokens) * 2 * c.hidden_dim),
        ffn(rows(max_tokens) * c.hidden_dim),
        gated_qkv(c.attn_output_gate ? rows(max_tokens) * (2 * c.q_dim() + 2 * c.kv_dim()) : 0),
        attn_gate(c.attn_output_gate ? rows(max_tokens) * c.q_dim() : 0),
        logits(rows(max_seqs) * c.vocab_size),
        token_ids(rows(max_seqs)),
        host_token_ids(rows(max_seqs)),
        sampling(rows(max_seqs)),
        host_sampling(rows(max_seqs)) {}

  size_t device_bytes() const {
    return x.bytes() + h.bytes() + qkv.bytes() + attn.bytes() + delta.bytes() + gate_up.bytes() + ffn.bytes() +
           gated_qkv.bytes() + attn_gate.bytes() + logits.bytes() + token_ids.bytes() + sampling.bytes();
  }

  DeviceBuffer<float> x;          // (max_tokens, dim) residual stream
  DeviceBuffer<T> h;              // (max_tokens, dim) normed input of the next GEMM; final-normed logits rows
  DeviceBuffer<T> qkv;            // (max_tokens, q_dim + 2 kv_dim) fused projection, q rotated in place
  DeviceBuffer<T> attn;           // (max_tokens, q_dim) attention output
  DeviceBuffer<T> delta;          // (max_tokens, dim) output of wo or w_down, added to x by the next norm
  DeviceBuffer<T> gate_up;        // (max_tokens, 2 hidden) fused gate|up projection
  DeviceBuffer<T> ffn;            // (max_tokens, hidden) SwiGLU output
  DeviceBuffer<T> gated_qkv;      // (max_tokens, 2 q_dim + 2 kv_dim) an output-gated projection (Qwen3.5), or empty
  DeviceBuffer<T> attn_gate;      // (max_tokens, q_dim) its gates, or empty
  DeviceBuffer<float> logits;     // (max_seqs, vocab)
  DeviceBuffer<int32_t> token_ids;          // (max_seqs) argmax or drawn ids of the sampling rows
  PinnedBuffer<int32_t> host_token_ids;     // (max_seqs) landing place of their copy
  DeviceBuffer<RowSampling> sampling;       // (max_seqs) the sampling rows' parameters, for sample_rows
  PinnedBuffer<RowSampling> host_sampling;  // (max_seqs) their staging copy

 private:
  static size_t rows(int n) { return static_cast<size_t>(n); }
};

}  // namespace cbatch
