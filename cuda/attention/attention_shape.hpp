// The geometry that the attention kernels share: heads, head size and the paged KV cache, and how a layer
// scores its keys. One layer's cache is (num_blocks, cache_heads, block_size, head_dim) for K and the same
// for V, of which the layer uses kv heads 0..num_kv_heads-1 (cache_heads > num_kv_heads: a layer narrower than
// the widest layer of its cache slot, Gemma 4's); cache position p of a sequence lives in block
// block_table[p / block_size] at offset p % block_size.
// No CUDA include: the kernels' block code that runs on the host in tests uses it too.
#pragma once

#include <math.h>

#include <cmath>

#include "engine/base/host_device.hpp"

namespace cbatch {

// Shapes of one attention layer: heads, head size and the paged cache geometry.
struct AttentionShape {
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int block_size = 0;   // tokens per KV block
  int num_blocks = 0;   // blocks in the cache
  // Heads' room in a cache block: a block is cache_heads * block_size * head_dim elements; 0: num_kv_heads.
  int cache_heads = 0;
  // Rows per tile of the attention tile list a launch takes (attention_tiles.hpp), where it was built for
  // another shape (a model whose layers differ in K/V heads); 0: paged_attention_rows_per_tile(*this).
  int tile_rows = 0;

  int block_heads() const { return cache_heads > 0 ? cache_heads : num_kv_heads; }
};

// How one layer scores its keys (ModelConfig's query_scale(), attn_softcap and window(layer); the CPU's
// AttentionParams): score = q.k * scale, then softcap * tanh(score / softcap) when softcap > 0; a query
// at position p sees keys first_key(p)..p, i.e. max(0, p - window + 1)..p when window > 0, else 0..p.
// With sinks (gpt-oss), q head h's sink logit sinks[h] joins its softmax once: in the max and the
// denominator, weighting no value (the CPU's attend_row). The default is Llama's: 1 / sqrt(head_dim), no
// softcap, no window, no sinks.
struct AttentionScoring {
  float scale = 0.0f;             // 0: 1 / sqrt(head_dim)
  float softcap = 0.0f;           // 0: none
  int window = 0;                 // 0: none
  const float* sinks = nullptr;   // (num_heads) fp32 on the device; null: none

  float scale_for(int head_dim) const { return scale > 0.0f ? scale : 1.0f / std::sqrt(static_cast<float>(head_dim)); }
  // The kernels' builds without the softcap, the window and the sinks serve this layer (tile_attention.cuh).
  bool is_plain() const { return softcap <= 0.0f && window <= 0 && sinks == nullptr; }
};

// A scaled score softcapped (Gemma 2): cap * tanh(score / cap), as the CPU computes it; cap <= 0: unchanged.
CBATCH_HOST_DEVICE inline float softcapped(float score, float cap) {
  return cap > 0.0f ? cap * tanhf(score / cap) : score;
}

// The factor that takes a head's unnormalized output o = sum exp(s - m) v (its online softmax's running
// max m, natural-log units, and sum l = sum exp(s - m)) to the attention output with the sink logit `sink`
// in the softmax: the sink joins the max, M = max(m, sink), and the denominator, as the CPU's attend_row
// adds exp(sink - M). The kernels divide o by l instead where the model has no sinks.
CBATCH_HOST_DEVICE inline float sink_normalizer(float m, float l, float sink) {
  const float top = fmaxf(m, sink);
  const float rescale = expf(m - top);
  return rescale / (l * rescale + expf(sink - top));
}

// A head's output element o (unnormalized) given its softmax state and the layer's sinks (null: none).
CBATCH_HOST_DEVICE inline float attention_output(float o, float m, float l, const float* sinks, int q_head) {
  return sinks == nullptr ? o / l : o * sink_normalizer(m, l, sinks[q_head]);
}

// The first key a query at position pos sees through a window of `window` keys (0: no window).
CBATCH_HOST_DEVICE inline int window_first_key(int pos, int window) {
  return window > 0 && pos >= window ? pos - window + 1 : 0;
}

}  // namespace cbatch
