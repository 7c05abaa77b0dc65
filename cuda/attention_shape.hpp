// The geometry that the attention kernels share: heads, head size and the paged KV cache, and how a layer
// scores its keys. One layer's cache is (num_blocks, num_kv_heads, block_size, head_dim) for K and the same
// for V; cache position p of a sequence lives in block block_table[p / block_size] at offset p % block_size.
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
};

// How one layer scores its keys (ModelConfig's query_scale(), attn_softcap and window(layer); the CPU's
// AttentionParams): score = q.k * scale, then softcap * tanh(score / softcap) when softcap > 0; a query
// at position p sees keys first_key(p)..p, i.e. max(0, p - window + 1)..p when window > 0, else 0..p.
// The default is Llama's: 1 / sqrt(head_dim), no softcap, no window.
struct AttentionScoring {
  float scale = 0.0f;    // 0: 1 / sqrt(head_dim)
  float softcap = 0.0f;  // 0: none
  int window = 0;        // 0: none

  float scale_for(int head_dim) const { return scale > 0.0f ? scale : 1.0f / std::sqrt(static_cast<float>(head_dim)); }
  // The kernels' builds without the softcap and the window serve this layer (see kernel_scoring.cuh).
  bool is_plain() const { return softcap <= 0.0f && window <= 0; }
};

// A scaled score softcapped (Gemma 2): cap * tanh(score / cap), as the CPU computes it; cap <= 0: unchanged.
CBATCH_HOST_DEVICE inline float softcapped(float score, float cap) {
  return cap > 0.0f ? cap * tanhf(score / cap) : score;
}

// The first key a query at position pos sees through a window of `window` keys (0: no window).
CBATCH_HOST_DEVICE inline int window_first_key(int pos, int window) {
  return window > 0 && pos >= window ? pos - window + 1 : 0;
}

}  // namespace cbatch
