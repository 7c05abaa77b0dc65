// Packing of LoRA adapters into the kernels' slots (lora_layout.hpp), and a step's tiles.
#include "cuda/lora/lora_layout.hpp"

#include <algorithm>
#include <string>

#include "engine/base/error.hpp"
#include "engine/model/deltanet_layout.hpp"

namespace cbatch {

std::vector<LoraAdapter> lora_adapters_for_cuda(const std::vector<LoraAdapter>& adapters, const ModelConfig& config) {
  std::vector<LoraAdapter> out = adapters;
  const DeltaNetSizes& d = config.deltanet;
  for (LoraAdapter& adapter : out) {
    const size_t num_pairs = adapter.pairs.size();
    for (size_t i = 0; i < num_pairs; ++i) {
      LoraPair& grouped = adapter.pairs[i];
      const bool qkvz = grouped.product == LoraProduct::kSsmQkvz && d.grouped_qkvz;
      if (qkvz || (grouped.product == LoraProduct::kSsmBa && d.grouped_ba)) {
        // The whole fused product (lora_targets.cpp), its B rows in the file's order: put them in the standard
        // order the upload gave the weight rows.
        const std::vector<int32_t> order =
            standard_order(qkvz ? grouped_qkvz_runs(d) : grouped_ba_runs(d), grouped.rows);
        std::vector<float> b(grouped.b.size());
        for (int64_t r = 0; r < grouped.rows; ++r) {
          std::copy_n(&grouped.b[static_cast<size_t>(order[static_cast<size_t>(r)] * grouped.rank)], grouped.rank,
                      &b[static_cast<size_t>(r * grouped.rank)]);
        }
        grouped.b = std::move(b);
      }
      const LoraPair& p = adapter.pairs[i];
      const bool is_k = p.product == LoraProduct::kQkv && p.row_offset == config.q_dim_of(p.layer);
      if (!is_k || !config.values_are_keys(p.layer) || !config.writes_kv(p.layer)) continue;
      LoraPair v = p;
      v.row_offset += config.kv_dim_of(p.layer);
      adapter.pairs.push_back(std::move(v));
    }
  }
  return out;
}

LoraPack pack_lora_adapters(const std::vector<LoraAdapter>& adapters, int num_layers) {
  LoraPack pack;
  pack.num_adapters = static_cast<int>(adapters.size());
  pack.slots.resize(static_cast<size_t>(num_layers) * kNumLoraProducts * (adapters.size() + 1));
  for (size_t id = 0; id < adapters.size(); ++id) {
    const LoraAdapter& adapter = adapters[id];
    for (int layer = 0; layer < num_layers; ++layer) {
      for (int product = 0; product < kNumLoraProducts; ++product) {
        std::vector<const LoraPair*> pairs;
        for (const LoraPair& p : adapter.pairs) {
          if (p.layer == layer && static_cast<int>(p.product) == product) pairs.push_back(&p);
        }
        if (pairs.empty()) continue;
        if (pairs.size() > static_cast<size_t>(kLoraMaxParts)) {
          throw Error("LoRA adapter '" + adapter.name + "': " + std::to_string(pairs.size()) + " pairs on one product "
                      "of layer " + std::to_string(layer) + " (the CUDA kernels take at most " +
                      std::to_string(kLoraMaxParts) + ")");
        }
        LoraPack::Slot& slot = pack.slots[pack.slot_index(layer, static_cast<LoraProduct>(product), static_cast<int>(id) + 1)];
        slot.a_offset = static_cast<int64_t>(pack.values.size());
        slot.in = static_cast<int32_t>(pairs.front()->in_features);
        for (const LoraPair* p : pairs) pack.values.insert(pack.values.end(), p->a.begin(), p->a.end());
        for (const LoraPair* p : pairs) {
          LoraPack::Part& part = slot.parts[slot.num_parts++];
          part.bt_offset = static_cast<int64_t>(pack.values.size());
          part.row_offset = static_cast<int32_t>(p->row_offset);
          part.rows = static_cast<int32_t>(p->rows);
          part.rank_offset = slot.rank_total;
          part.rank = p->rank;
          slot.rank_total += p->rank;
          for (int k = 0; k < p->rank; ++k) {  // (scale * B)^T: the CPU folds the scale into B the same way
            for (int64_t j = 0; j < p->rows; ++j) pack.values.push_back(p->scale * p->b[static_cast<size_t>(j * p->rank + k)]);
          }
        }
        pack.max_rank_total = std::max(pack.max_rank_total, slot.rank_total);
      }
    }
  }
  return pack;
}

void build_lora_tiles(const int32_t* row_adapter, int num_rows, std::vector<LoraTile>& tiles) {
  for (int r = 0; r < num_rows;) {
    const int32_t id = row_adapter[r];
    int end = r + 1;
    while (end < num_rows && row_adapter[end] == id) ++end;  // one segment
    if (id != 0) {
      for (int t = r; t < end; t += kLoraTileRows) tiles.push_back(LoraTile{t, std::min(kLoraTileRows, end - t), id});
    }
    r = end;
  }
}

}  // namespace cbatch
