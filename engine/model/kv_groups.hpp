// KV cache groups: which layers keep which K/V, derived from a ModelConfig (never written back into it).
// Layers that keep the same thing form a kind: full attention (every position), a window of W positions
// (only the blocks that meet the last W positions), or nothing (recurrent layers, and a layer that reads
// another layer's K/V: Gemma 4's shared layers, mapped to their source layer's group and slot, reading its
// block table and writing nothing). Each kind's layers, in layer order, are cut into groups of layers_per_page layers,
// the same count for every group (the gcd of the kinds' layer counts), so that one pool of equal pages
// serves them all: a page holds block_size tokens of K and V of one group's layers, and layer l reads and
// writes its group's page at cache slot layer_slot[l] (0..layers_per_page). Gemma 3 270M: 15 windowed and
// 3 full layers -> 6 groups of 3 (5 windowed, 1 full). A model of one kind has one group of all its layers.
// Layers of different K/V widths (Gemma 4's global layers: their own head size and K/V heads) share the
// pool: every cache slot is slot_values wide (the largest kv_dim_of over the cached layers), a narrower
// layer using the first kv_dim_of(l) of them (docs/architecture.md#kv-memory-by-layer-kind: the padding's
// cost).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/model/model_config.hpp"

namespace cbatch {

struct KvGroup {
  int window = 0;           // keys a query sees, its own included; 0 = every position (full attention)
  std::vector<int> layers;  // (layers_per_page) the model layers whose K/V its pages hold, in slot order
};

struct KvGroups {
  std::vector<KvGroup> groups;  // full-attention groups first, then windowed ones by window, layer order inside
  // A shared layer (writes_kv false) gets its source layer's group and slot; it holds no blocks of its own.
  std::vector<int> layer_group;  // (num_layers) the layer's group; -1: the layer reads no K/V
  std::vector<int> layer_slot;   // (num_layers) its cache slot inside its group's pages; -1 with no group
  int layers_per_page = 0;       // layers of every group (cache slots a page has)
  int slot_values = 0;           // K (and V) values of one token in one cache slot: the widest layer's

  int num_groups() const { return static_cast<int>(groups.size()); }
  std::vector<int> windows() const;  // (num_groups) each group's window
  // Pages one sequence of num_tokens holds at most while chunks of at most chunk_tokens are computed: every
  // block for a full group; a windowed group's blocks that meet [p - W + 1, p + chunk) for some p.
  int64_t pages_for_tokens(int64_t num_tokens, int block_size, int64_t chunk_tokens) const;
  std::string describe() const;  // "6 groups of 3 layers: 1 full, 5 window 512"
};

KvGroups kv_groups(const ModelConfig& config);

// Blocks a group of window W > 0 holds at most for one sequence computed in chunks of at most chunk_tokens:
// the W - 1 keys behind a chunk's first query and the chunk, one block more when they are not aligned.
int64_t window_span_blocks(int window, int block_size, int64_t chunk_tokens);

}  // namespace cbatch
