// The layout of LoRA adapters for the CUDA kernels (lora.cu), host-only and free of CUDA headers so the
// block emulator's tests use it too. Per (layer, product, adapter) one slot: the adapter's pairs on that
// product with their A matrices stacked, (rank_total, in) rows in pair order, and per pair ("part") its
// expand matrix (scale * B)^T, (rank, rows), the output rows it adds to and where its ranks start in the
// stacked shrink. Adapter 0 (the base model) has an empty slot. A step's rows reach the kernels as tiles:
// runs of at most kLoraTileRows consecutive rows of one adapter (sequences in a row with the same adapter
// form one segment, cut into tiles); rows of the base model are in no tile.
#pragma once
#include <cstdint>
#include <vector>

#include "engine/model/lora_adapter.hpp"

namespace cbatch {

constexpr int kLoraTileRows = 8;  // rows a block shrinks and expands together (one A and B read for all)
constexpr int kLoraMaxParts = 3;  // pairs an adapter puts on one product: q, k, v (or gate, up)

// The adapters as the CUDA products hold their rows: a layer whose values are its keys (Gemma 4's k_eq_v)
// has its k rows uploaded twice, [q | k | v = k] (device_weights.cpp), so its k pair is repeated on the v rows;
// Qwen3-Next's grouped DeltaNet input rows are uploaded in the standard order (deltanet_layout.hpp), so its
// in_proj_qkvz / in_proj_ba pairs' B rows are put in that order too.
std::vector<LoraAdapter> lora_adapters_for_cuda(const std::vector<LoraAdapter>& adapters, const ModelConfig& config);

struct LoraTile {
  int32_t row = 0;      // first row
  int32_t rows = 0;     // 1..kLoraTileRows
  int32_t adapter = 0;  // 1-based adapter id
};

template <typename T>
struct LoraDevicePart {
  const T* bt = nullptr;  // (rank, rows) (scale * B)^T
  int32_t row_offset = 0;  // first output row of the product it adds to
  int32_t rows = 0;
  int32_t rank_offset = 0;  // its ranks' first column in the shrunk rows
  int32_t rank = 0;
};

template <typename T>
struct LoraDeviceSlot {
  const T* a = nullptr;  // (rank_total, in) the parts' A, stacked
  int32_t rank_total = 0;
  int32_t in = 0;
  int32_t num_parts = 0;
  LoraDevicePart<T> parts[kLoraMaxParts];
};

// Every adapter's matrices in one fp32 arena (A stacked per slot; (scale * B)^T per part) and the slots
// with arena offsets in place of pointers: slots[(layer * kNumLoraProducts + product) * (num_adapters + 1) +
// adapter].
struct LoraPack {
  struct Part {
    int64_t bt_offset = 0;
    int32_t row_offset = 0, rows = 0, rank_offset = 0, rank = 0;
  };
  struct Slot {
    int64_t a_offset = 0;
    int32_t rank_total = 0, in = 0, num_parts = 0;
    Part parts[kLoraMaxParts];
  };
  int num_adapters = 0;
  int max_rank_total = 0;     // the widest slot: columns of the shrunk rows
  std::vector<float> values;  // the arena
  std::vector<Slot> slots;    // (num_layers, kNumLoraProducts, num_adapters + 1)

  size_t slot_index(int layer, LoraProduct product, int adapter) const {
    return (static_cast<size_t>(layer) * kNumLoraProducts + static_cast<size_t>(product)) *
               static_cast<size_t>(num_adapters + 1) + static_cast<size_t>(adapter);
  }
};

// Packs the adapters for a model of num_layers layers. Throws cbatch::Error naming the adapter when one puts
// more than kLoraMaxParts pairs on one product of a layer.
LoraPack pack_lora_adapters(const std::vector<LoraAdapter>& adapters, int num_layers);

// The slots with pointers into `arena`, the pack's values converted to T wherever they live (device or,
// in the emulator's tests, host memory).
template <typename T>
std::vector<LoraDeviceSlot<T>> lora_slots(const LoraPack& pack, const T* arena) {
  std::vector<LoraDeviceSlot<T>> out(pack.slots.size());
  for (size_t i = 0; i < pack.slots.size(); ++i) {
    const LoraPack::Slot& s = pack.slots[i];
    LoraDeviceSlot<T>& d = out[i];
    if (s.num_parts == 0) continue;
    d.a = arena + s.a_offset;
    d.rank_total = s.rank_total;
    d.in = s.in;
    d.num_parts = s.num_parts;
    for (int p = 0; p < s.num_parts; ++p) {
      const LoraPack::Part& q = s.parts[p];
      d.parts[p] = LoraDevicePart<T>{arena + q.bt_offset, q.row_offset, q.rows, q.rank_offset, q.rank};
    }
  }
  return out;
}

// A step's tiles: row_adapter (num_rows) is each row's adapter (0 = none). Appends to `tiles`.
void build_lora_tiles(const int32_t* row_adapter, int num_rows, std::vector<LoraTile>& tiles);

}  // namespace cbatch
