// The LoRA kernels' block code (lora_block.cuh) run on the CPU by the block emulator against the CPU
// backend's CpuLoraSet::add (lora_case.hpp): every product of both layers, in fp32, bf16 and fp16, with the
// step's rows mixing four adapters (ranks 1 to 64, separate and fused q|k|v, partial q/v coverage) and base
// rows, which must come back bit for bit untouched; the shrunk scratch starts poisoned (NaN): no row may
// read a rank it was not given. Also the tiles and the pack on their own. test_lora.cpp runs the same cases on the GPU.
#include <math.h>
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "cuda/lora/lora_layout.hpp"
#include "engine/model/deltanet_layout.hpp"
#include "tests/cuda/lora_case.hpp"
#include "tests/cuda/test_util.hpp"
// Last: the emulator defines the CUDA keywords as macros, for the device code after it.
#pragma GCC diagnostic ignored "-Wsign-compare"
#include "tests/cuda/block_emulator.hpp"
#include "cuda/common/cuda_dtype.cuh"
#include "cuda/lora/lora_block.cuh"

namespace cbatch::test {
namespace {

using namespace lora_detail;

template <typename T>
void check_lora_emulated(int num_rows) {
  LoraCase c = make_lora_case(num_rows, 11);
  round_lora_case<T>(c);
  const LoraPack pack = pack_lora_adapters(c.adapters, LoraCase::kLayers);
  std::vector<T> arena(pack.values.size());
  for (size_t i = 0; i < arena.size(); ++i) arena[i] = from_f32<T>(pack.values[i]);
  const std::vector<LoraDeviceSlot<T>> slots = lora_slots<T>(pack, arena.data());
  std::vector<LoraTile> tiles;
  build_lora_tiles(c.row_adapter.data(), num_rows, tiles);
  for (int layer = 0; layer < LoraCase::kLayers; ++layer) {
    for (const LoraProductCase& pc : LoraCase::products()) {
      CAPTURE(layer);
      CAPTURE(static_cast<int>(pc.product));
      const std::vector<float> x = round_to<T>(random_vector(static_cast<size_t>(num_rows) * pc.in, 3 + layer));
      const std::vector<float> y0 = round_to<T>(random_vector(static_cast<size_t>(num_rows) * pc.width, 5, -0.1f, 0.1f));
      const std::vector<double> want = lora_ref(c, pc.product, layer, x, pc.in, y0, pc.width);
      std::vector<T> xt(x.size()), y(y0.size());
      for (size_t i = 0; i < x.size(); ++i) xt[i] = from_f32<T>(x[i]);
      for (size_t i = 0; i < y0.size(); ++i) y[i] = from_f32<T>(y0[i]);
      const int t_stride = pack.max_rank_total;
      std::vector<float> t(static_cast<size_t>(num_rows) * t_stride, NAN);
      const LoraDeviceSlot<T>* s = slots.data() + pack.slot_index(layer, pc.product, 0);
      const unsigned num_tiles = static_cast<unsigned>(tiles.size());
      block_emulator::launch(num_tiles, kShrinkThreads,
                             [&] { lora_shrink_block<T>(t.data(), t_stride, xt.data(), pc.in, s, tiles.data()); });
      const unsigned chunks = static_cast<unsigned>((pc.width + kExpandThreads - 1) / kExpandThreads);
      block_emulator::launch(block_emulator::Index{num_tiles, chunks, 1}, kExpandThreads,
                             [&] { lora_expand_block<T>(y.data(), pc.width, t.data(), t_stride, s, tiles.data()); });
      std::vector<float> out(y.size());
      for (size_t i = 0; i < y.size(); ++i) out[i] = to_f32(y[i]);
      CHECK(rel_error(out, want) < tolerance<T>());
      size_t base_changed = 0, changed = 0;
      for (int r = 0; r < num_rows; ++r) {
        for (int j = 0; j < pc.width; ++j) {
          const size_t i = static_cast<size_t>(r) * pc.width + j;
          if (c.row_adapter[static_cast<size_t>(r)] == 0) base_changed += out[i] != y0[i];
          changed += std::fabs(want[i] - y0[i]) > 1e-3;
        }
      }
      CHECK(base_changed == 0);
      CHECK(changed > static_cast<size_t>(num_rows));  // the adapters matter: the comparison bites
    }
  }
}

}  // namespace

TEST_SUITE("host") {

TEST_CASE("lora tiles: segments of one adapter cut at kLoraTileRows, base rows in none") {
  const std::vector<int32_t> rows = {0, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 1, 0, 0, 1, 1, 3};
  std::vector<LoraTile> tiles;
  build_lora_tiles(rows.data(), static_cast<int>(rows.size()), tiles);
  REQUIRE(tiles.size() == 5);
  const int32_t want[5][3] = {{1, 8, 2}, {9, 2, 2}, {11, 1, 1}, {14, 2, 1}, {16, 1, 3}};
  for (size_t i = 0; i < tiles.size(); ++i) {
    CHECK(tiles[i].row == want[i][0]);
    CHECK(tiles[i].rows == want[i][1]);
    CHECK(tiles[i].adapter == want[i][2]);
  }
}

TEST_CASE("lora pack: stacked A, parts with their rows and rank offsets, (scale B)^T, empty base slots") {
  const LoraCase c = make_lora_case(4, 1);
  const LoraPack pack = pack_lora_adapters(c.adapters, LoraCase::kLayers);
  CHECK(pack.num_adapters == 4);
  CHECK(pack.max_rank_total == 64);  // adapter 2: fused gate_up_proj and down, each one part of rank 64
  const LoraPack::Slot& q = pack.slots[pack.slot_index(1, LoraProduct::kQkv, 1)];
  REQUIRE(q.num_parts == 3);
  CHECK(q.rank_total == 14);
  CHECK(q.parts[1].row_offset == LoraCase::kQ);
  CHECK(q.parts[1].rank_offset == 4);
  CHECK(q.parts[2].rank_offset == 12);
  const LoraPair& k = c.adapters[0].pairs[10];  // layer 1's k pair
  REQUIRE(k.layer == 1);
  CHECK(pack.values[static_cast<size_t>(q.parts[1].bt_offset) + 3 * k.rows + 5] == k.scale * k.b[5 * k.rank + 3]);
  CHECK(pack.values[static_cast<size_t>(q.a_offset) + 4 * k.in_features] == k.a[0]);
  for (int layer = 0; layer < LoraCase::kLayers; ++layer) {
    CHECK(pack.slots[pack.slot_index(layer, LoraProduct::kQkv, 0)].num_parts == 0);
  }
  CHECK(pack.slots[pack.slot_index(0, LoraProduct::kO, 4)].num_parts == 0);
  CHECK(pack.slots[pack.slot_index(1, LoraProduct::kO, 4)].num_parts == 1);
}

TEST_CASE("lora adapters for CUDA: a K=V layer's k pair repeated on its v rows, nothing else changed") {
  ModelConfig config;
  config.dim = 40;
  config.num_layers = 2;
  config.num_heads = 2;
  config.num_kv_heads = 2;
  config.head_dim = 16;
  config.layer_window = {8, 0};  // layer 1 global: its values are its keys
  config.global_values_are_keys = true;
  config.global_kv_heads = 1;
  LoraAdapter adapter;
  for (int layer = 0; layer < 2; ++layer) {
    const int kv = config.kv_dim_of(layer);
    adapter.pairs.push_back(make_lora_pair(layer, LoraProduct::kQkv, 0, 32, 40, 2, 1.0f, 3));
    adapter.pairs.push_back(make_lora_pair(layer, LoraProduct::kQkv, 32, kv, 40, 2, 1.0f, 5));
  }
  const std::vector<LoraAdapter> out = lora_adapters_for_cuda({adapter}, config);
  REQUIRE(out[0].pairs.size() == 5);
  const LoraPair& v = out[0].pairs[4];
  CHECK((v.layer == 1 && v.product == LoraProduct::kQkv && v.row_offset == 32 + 16 && v.rows == 16));
  CHECK((v.a == adapter.pairs[3].a && v.b == adapter.pairs[3].b && v.scale == adapter.pairs[3].scale));
}

TEST_CASE("lora adapters for CUDA: Qwen3-Next's grouped DeltaNet pairs take the upload's standard row order") {
  ModelConfig config;
  config.dim = 24;
  config.num_layers = 1;
  DeltaNetSizes& d = config.deltanet;
  d.num_k_heads = 2;
  d.num_v_heads = 4;
  d.k_head_dim = 4;
  d.v_head_dim = 3;
  d.grouped_qkvz = d.grouped_ba = true;
  const int64_t qkvz = d.conv_dim() + d.value_dim(), ba = 2 * d.num_v_heads;
  LoraAdapter adapter;
  adapter.pairs.push_back(make_lora_pair(0, LoraProduct::kSsmQkvz, 0, static_cast<int>(qkvz), 24, 2, 1.0f, 7));
  adapter.pairs.push_back(make_lora_pair(0, LoraProduct::kSsmBa, 0, static_cast<int>(ba), 24, 2, 1.0f, 9));
  const std::vector<LoraAdapter> out = lora_adapters_for_cuda({adapter}, config);
  REQUIRE(out[0].pairs.size() == 2);
  for (int p = 0; p < 2; ++p) {
    const LoraPair& in = adapter.pairs[static_cast<size_t>(p)];
    const LoraPair& got = out[0].pairs[static_cast<size_t>(p)];
    const std::vector<int32_t> order = standard_order(p == 0 ? grouped_qkvz_runs(d) : grouped_ba_runs(d), in.rows);
    bool moved = false;
    for (int64_t r = 0; r < in.rows; ++r) {
      moved = moved || order[static_cast<size_t>(r)] != r;
      for (int j = 0; j < in.rank; ++j) {
        CHECK(got.b[static_cast<size_t>(r * in.rank + j)] == in.b[static_cast<size_t>(order[static_cast<size_t>(r)] * in.rank + j)]);
      }
    }
    CHECK(moved);
    CHECK(got.a == in.a);
  }
}

TEST_CASE("lora shrink + expand (emulated): the CPU's grouped product over mixed adapters, fp32") {
  check_lora_emulated<float>(22);
  check_lora_emulated<float>(37);
}

TEST_CASE("lora shrink + expand (emulated): bf16 and fp16") {
  check_lora_emulated<__nv_bfloat16>(30);
  check_lora_emulated<__half>(30);
}

}  // TEST_SUITE("host")

}  // namespace cbatch::test
