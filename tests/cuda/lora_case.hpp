// The LoRA kernel cases shared by test_lora_emulated.cpp (block emulator) and test_lora.cpp (GPU): a small
// 2-layer base (dim 40, q 32, kv 16, hidden 48) and four adapters of ranks 1 to 64 over every product —
// separate q, k, v pairs of different ranks, a q-only and a v-only one, Phi-3's fused qkv_proj and
// gate_up_proj, o and down — and a step's rows mixing them with rows of the base model (segments longer
// than a tile, single rows, an adapter with no pair on the product). The reference is the CPU backend's
// CpuLoraSet::add on the same fp32 values.
#pragma once
#include <cstdint>
#include <vector>

#include "engine/base/thread_pool.hpp"
#include "engine/cpu/cpu_lora.hpp"
#include "tests/cuda/test_util.hpp"

namespace cbatch::test {

struct LoraProductCase {
  LoraProduct product;
  int in = 0;     // x columns
  int width = 0;  // y columns
};

struct LoraCase {
  static constexpr int kDim = 40, kQ = 32, kKv = 16, kHidden = 48, kLayers = 2;
  static constexpr int kConv = 24, kZ = 16;  // a DeltaNet's q|k|v (conv) rows and z rows
  std::vector<LoraAdapter> adapters;
  std::vector<int32_t> row_adapter;  // (num_rows)

  static std::vector<LoraProductCase> products() {
    return {{LoraProduct::kQkv, kDim, kQ + 2 * kKv}, {LoraProduct::kO, kQ, kDim},
            {LoraProduct::kGateUp, kDim, 2 * kHidden}, {LoraProduct::kDown, kHidden, kDim},
            {LoraProduct::kSsmQkvz, kDim, kConv + kZ}, {LoraProduct::kSsmOut, kZ, kDim}};
  }
};

inline LoraPair make_lora_pair(int layer, LoraProduct product, int64_t row_offset, int64_t rows, int64_t in, int rank,
                               float scale, uint32_t seed) {
  LoraPair p;
  p.module = "test";
  p.layer = layer;
  p.product = product;
  p.row_offset = row_offset;
  p.rows = rows;
  p.in_features = in;
  p.rank = rank;
  p.scale = scale;
  p.a = random_vector(static_cast<size_t>(rank * in), seed);
  p.b = random_vector(static_cast<size_t>(rows * rank), seed + 1);
  return p;
}

// Adapters 1..4 (ids 1-based, as RaggedBatch::lora_ids) and num_rows rows of them.
inline LoraCase make_lora_case(int num_rows, uint32_t seed) {
  using C = LoraCase;
  LoraCase c;
  c.adapters.resize(4);
  uint32_t s = seed;
  for (int layer = 0; layer < C::kLayers; ++layer) {
    std::vector<LoraPair>& a1 = c.adapters[0].pairs;  // Llama style: q, k, v of different ranks; o; gate, up
    a1.push_back(make_lora_pair(layer, LoraProduct::kQkv, 0, C::kQ, C::kDim, 4, 0.5f, s += 2));
    a1.push_back(make_lora_pair(layer, LoraProduct::kQkv, C::kQ, C::kKv, C::kDim, 8, 0.5f, s += 2));
    a1.push_back(make_lora_pair(layer, LoraProduct::kQkv, C::kQ + C::kKv, C::kKv, C::kDim, 2, 0.5f, s += 2));
    a1.push_back(make_lora_pair(layer, LoraProduct::kO, 0, C::kDim, C::kQ, 4, 0.5f, s += 2));
    a1.push_back(make_lora_pair(layer, LoraProduct::kGateUp, 0, C::kHidden, C::kDim, 4, 0.5f, s += 2));
    a1.push_back(make_lora_pair(layer, LoraProduct::kGateUp, C::kHidden, C::kHidden, C::kDim, 4, 0.5f, s += 2));
    // a hybrid's DeltaNet input (in_proj_qkv, in_proj_z: two parts of one product) and output
    a1.push_back(make_lora_pair(layer, LoraProduct::kSsmQkvz, 0, C::kConv, C::kDim, 4, 0.5f, s += 2));
    a1.push_back(make_lora_pair(layer, LoraProduct::kSsmQkvz, C::kConv, C::kZ, C::kDim, 2, 0.5f, s += 2));
    a1.push_back(make_lora_pair(layer, LoraProduct::kSsmOut, 0, C::kDim, C::kZ, 4, 0.5f, s += 2));
    std::vector<LoraPair>& a2 = c.adapters[1].pairs;  // Phi-3: fused qkv_proj and gate_up_proj; down; rank 64
    a2.push_back(make_lora_pair(layer, LoraProduct::kQkv, 0, C::kQ + 2 * C::kKv, C::kDim, 16, 0.25f, s += 2));
    a2.push_back(make_lora_pair(layer, LoraProduct::kGateUp, 0, 2 * C::kHidden, C::kDim, 64, 0.125f, s += 2));
    a2.push_back(make_lora_pair(layer, LoraProduct::kDown, 0, C::kDim, C::kHidden, 64, 0.125f, s += 2));
    std::vector<LoraPair>& a3 = c.adapters[2].pairs;  // q and v only (rows left out between), rank 1; down
    a3.push_back(make_lora_pair(layer, LoraProduct::kQkv, 0, C::kQ, C::kDim, 1, 2.0f, s += 2));
    a3.push_back(make_lora_pair(layer, LoraProduct::kQkv, C::kQ + C::kKv, C::kKv, C::kDim, 1, 2.0f, s += 2));
    a3.push_back(make_lora_pair(layer, LoraProduct::kDown, 0, C::kDim, C::kHidden, 8, 0.7f, s += 2));
    a3.push_back(make_lora_pair(layer, LoraProduct::kSsmQkvz, C::kConv, C::kZ, C::kDim, 8, 0.7f, s += 2));
    if (layer == 1) {  // adapter 4: o only, layer 1 only
      c.adapters[3].pairs.push_back(make_lora_pair(layer, LoraProduct::kO, 0, C::kDim, C::kQ, 8, 0.35f, s += 2));
    }
  }
  for (size_t i = 0; i < c.adapters.size(); ++i) {
    c.adapters[i].name = "a" + std::to_string(i + 1);
    for (const LoraPair& p : c.adapters[i].pairs) c.adapters[i].rank = std::max(c.adapters[i].rank, p.rank);
  }
  // Segments: 3 rows of a1, 2 base rows, 11 of a2 (two tiles), single rows of a1, a4, a3, base, then
  // a pattern that cycles; 0 = base.
  const std::vector<int32_t> head = {1, 1, 1, 0, 0, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 1, 4, 3, 0, 3, 3};
  for (int r = 0; r < num_rows; ++r) {
    c.row_adapter.push_back(r < static_cast<int>(head.size()) ? head[static_cast<size_t>(r)] : (r * 7 + 3) % 5);
  }
  return c;
}

// Rounds every pair's A and B to the values T holds, so the reference sees what the kernels see (B's scale is
// folded in fp32 before the kernels' rounding, which stays inside the tolerance).
template <typename T>
void round_lora_case(LoraCase& c) {
  for (LoraAdapter& a : c.adapters) {
    for (LoraPair& p : a.pairs) {
      p.a = round_to<T>(p.a);
      p.b = round_to<T>(p.b);
    }
  }
}

// y (num_rows, width) += the adapters' product on x (num_rows, in), on the CPU backend's path.
inline std::vector<double> lora_ref(const LoraCase& c, LoraProduct product, int layer, const std::vector<float>& x,
                                    int in, std::vector<float> y, int width) {
  ThreadPool pool(1);
  CpuLoraSet set(c.adapters, LoraCase::kLayers, pool);
  set.add(product, layer, group_lora_rows(c.row_adapter), x.data(), in, y.data(), width, pool);
  return std::vector<double>(y.begin(), y.end());
}

}  // namespace cbatch::test
