// What a model family adds to a layer's RoPE step (rope_kv_cache.hpp): q/k/v biases, q/k norms, the
// longrope table and the attention factor, as device pointers and values. No CUDA include: the RoPE block
// code (rope_kv_cache_block.cuh) reads it on the host in tests too.
#pragma once
#include <climits>

namespace cbatch {

// What a family adds to a layer's RoPE step, in the CPU backend's order: biases added to q, k and v, then
// the RMSNorm of every q and k head (and of every v head, without weights), then the rotation (by the
// longrope table from position long_from on, cos and sin times attention_factor). The defaults are Llama's:
// nothing added.
struct RopeFamily {
  const float* qkv_bias = nullptr;       // (q_dim + 2 * kv_dim) fp32: bq, bk, bv (Qwen2)
  const float* q_norm = nullptr;         // (head_dim) fp32: every q head's norm weight (Qwen3, Gemma 3)
  const float* k_norm = nullptr;         // (head_dim) fp32: every k head's; given with q_norm
  bool qk_norm_whole = false;            // one norm over all q heads (q_norm: q_dim weights), one over all k
                                         // heads (k_norm: kv_dim weights), as OLMoE and OLMo 2
  float norm_eps = 1e-6f;
  const float* long_inv_freq = nullptr;  // (head_dim / 2) fp32: longrope's table for positions >= long_from
  int long_from = INT_MAX;
  float attention_factor = 1.0f;         // yarn, longrope
  bool rotates = true;                   // false: q and k keep their values (a NoPE layer: SmolLM3)
  int rotary_half = 0;                   // partial rotary (Qwen3.5): the pairs rotated, rotary_dims / 2, over the
                                         // head's first rotary_dims dims; 0: every pair (head_dim / 2)
  bool value_norm = false;               // every v head RMS-normed without weights before it is cached (Gemma 4)
  bool stores_kv = true;                 // false: a layer that reads another's K/V (Gemma 4's shared layers): its
                                         // q heads normed and rotated, nothing cached, the k and v heads unread

  bool is_plain() const {
    return qkv_bias == nullptr && q_norm == nullptr && long_from == INT_MAX && attention_factor == 1.0f && rotates &&
           rotary_half == 0 && !value_norm && stores_kv;
  }
};

}  // namespace cbatch
