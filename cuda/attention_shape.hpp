// The geometry that the attention kernels share: heads, head size and the paged KV cache. One layer's
// cache is (num_blocks, num_kv_heads, block_size, head_dim) for K and the same for V; cache position p
// of a sequence lives in block block_table[p / block_size] at offset p % block_size.
#pragma once

namespace cbatch {

// Shapes of one attention layer: heads, head size and the paged cache geometry.
struct AttentionShape {
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int block_size = 0;   // tokens per KV block
  int num_blocks = 0;   // blocks in the cache
};

}  // namespace cbatch
