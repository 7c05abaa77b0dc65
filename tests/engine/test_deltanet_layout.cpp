// Qwen3-Next's DeltaNet projections grouped by key head (deltanet_layout.hpp): the runs put the rows of a file
// laid out as transformers' Qwen3-Next reads it back into Qwen3.5's order; the CPU backend's reading (the
// product of the grouped weight, then its values reordered) and the CUDA upload's (the weight's rows copied
// into the standard order run by run, then the product) give the same projections, bit for bit, from fp32
// rows and from Q8_0 block rows moved as whole rows. Qwen3.5's value heads between Hugging Face's order and
// llama.cpp's tiled one (the permutation its converter applies), each way.
#include <doctest/doctest.h>

#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "engine/model/deltanet_layout.hpp"
#include "engine/model/quant_blocks.hpp"
#include "engine/model/tensor.hpp"

namespace cbatch {
namespace {

// 2 key heads of 2 dims, 6 value heads of 3 dims (3 per key head), and a Qwen3-Next-like 16 / 32 heads.
DeltaNetSizes small_sizes() { return DeltaNetSizes{2, 6, 2, 3, 4}; }
DeltaNetSizes wide_sizes() { return DeltaNetSizes{16, 32, 8, 4, 4}; }

// in_proj_qkvz as transformers' Qwen3-Next splits it (fix_query_key_value_ordering): per key head kh, its q
// and k rows, then the v and z rows of its value heads kh * r .. kh * r + r - 1. Rows are named by their
// standard-order index ([q of every head | k | v | z], value head j at j * v_head_dim).
std::vector<int64_t> grouped_qkvz_names(const DeltaNetSizes& d) {
  const int r = d.num_v_heads / d.num_k_heads;
  std::vector<int64_t> stored;
  auto append = [&](int64_t first, int64_t count) {
    for (int64_t t = 0; t < count; ++t) stored.push_back(first + t);
  };
  for (int kh = 0; kh < d.num_k_heads; ++kh) {
    append(int64_t{kh} * d.k_head_dim, d.k_head_dim);
    append(d.key_dim() + int64_t{kh} * d.k_head_dim, d.k_head_dim);
    for (int i = 0; i < r; ++i) append(2 * d.key_dim() + int64_t{kh * r + i} * d.v_head_dim, d.v_head_dim);
    for (int i = 0; i < r; ++i) append(d.conv_dim() + int64_t{kh * r + i} * d.v_head_dim, d.v_head_dim);
  }
  return stored;
}

// in_proj_ba likewise: per key head, b of its value heads, then a of its value heads.
std::vector<int64_t> grouped_ba_names(const DeltaNetSizes& d) {
  const int r = d.num_v_heads / d.num_k_heads;
  std::vector<int64_t> stored;
  for (int kh = 0; kh < d.num_k_heads; ++kh) {
    for (int i = 0; i < r; ++i) stored.push_back(kh * r + i);
    for (int i = 0; i < r; ++i) stored.push_back(d.num_v_heads + kh * r + i);
  }
  return stored;
}

// Rows of row_bytes bytes put in the standard order as the CUDA upload copies them (memcpy for its device copy).
std::vector<uint8_t> standard_rows(const std::vector<RowRun>& runs, const std::vector<uint8_t>& stored, int64_t row_bytes) {
  std::vector<uint8_t> out(stored.size(), 0xA5);  // poisoned: a row no run writes shows
  copy_row_runs(runs, row_bytes, [&](int64_t dst, int64_t src, int64_t bytes) {
    std::memcpy(out.data() + dst, stored.data() + src, static_cast<size_t>(bytes));
  });
  return out;
}

// y (rows, out) = x (rows, in) times w (out, in) transposed, in one fixed order per value.
std::vector<float> product(const std::vector<float>& x, const std::vector<float>& w, int64_t rows, int64_t in) {
  const int64_t out = static_cast<int64_t>(w.size()) / in;
  std::vector<float> y(static_cast<size_t>(rows * out));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t o = 0; o < out; ++o) {
      float acc = 0.0f;
      for (int64_t i = 0; i < in; ++i) acc += x[r * in + i] * w[o * in + i];
      y[r * out + o] = acc;
    }
  }
  return y;
}

std::vector<float> random_values(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

std::vector<uint8_t> bytes_of(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(float));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

std::vector<float> floats_of(const std::vector<uint8_t>& b) {
  std::vector<float> v(b.size() / sizeof(float));
  std::memcpy(v.data(), b.data(), b.size());
  return v;
}

}  // namespace

TEST_CASE("DeltaNet layout: the runs put transformers' grouped rows of Qwen3-Next in Qwen3.5's order") {
  for (const DeltaNetSizes& d : {small_sizes(), wide_sizes()}) {
    const std::vector<int64_t> qkvz = grouped_qkvz_names(d), ba = grouped_ba_names(d);
    REQUIRE(qkvz.size() == static_cast<size_t>(d.conv_dim() + d.value_dim()));
    const std::vector<int32_t> qkvz_order = standard_order(grouped_qkvz_runs(d), static_cast<int64_t>(qkvz.size()));
    const std::vector<int32_t> ba_order = standard_order(grouped_ba_runs(d), static_cast<int64_t>(ba.size()));
    for (size_t i = 0; i < qkvz.size(); ++i) CHECK(qkvz[static_cast<size_t>(qkvz_order[i])] == static_cast<int64_t>(i));
    for (size_t i = 0; i < ba.size(); ++i) CHECK(ba[static_cast<size_t>(ba_order[i])] == static_cast<int64_t>(i));
  }
  // Spelled out for 2 key heads of 2 dims and 6 value heads of 3 dims (groups of 22 stored rows): the q rows
  // are stored rows 0-1 (key head 0) and 22-23 (key head 1); value head 0's v is at 4 and its z at 13, after
  // its key head's 9 v rows; value head 3's v, the first of key head 1, at 26.
  const std::vector<int32_t> order = standard_order(grouped_qkvz_runs(small_sizes()), 44);
  CHECK(std::vector<int32_t>(order.begin(), order.begin() + 4) == std::vector<int32_t>{0, 1, 22, 23});
  CHECK(std::vector<int32_t>(order.begin() + 4, order.begin() + 8) == std::vector<int32_t>{2, 3, 24, 25});
  CHECK(order[8] == 4);   // v of value head 0
  CHECK(order[17] == 26);  // v of value head 3, the first of key head 1
  CHECK(order[26] == 13);  // z of value head 0
  CHECK(standard_order(grouped_ba_runs(small_sizes()), 12) == std::vector<int32_t>{0, 1, 2, 6, 7, 8, 3, 4, 5, 9, 10, 11});
}

TEST_CASE("DeltaNet layout: the CPU's reading and the upload's reordered rows give the same projections") {
  std::mt19937 rng(5);
  const int64_t dim = 64, rows = 3;  // dim a multiple of Q8_0's 32
  for (const DeltaNetSizes& d : {small_sizes(), wide_sizes()}) {
    const std::vector<RowRun> qkvz_runs = grouped_qkvz_runs(d), ba_runs = grouped_ba_runs(d);
    for (const auto* runs : {&qkvz_runs, &ba_runs}) {
      const int64_t out = runs == &qkvz_runs ? d.conv_dim() + d.value_dim() : 2 * d.num_v_heads;
      const std::vector<float> w = random_values(static_cast<size_t>(out * dim), rng);
      const std::vector<float> x = random_values(static_cast<size_t>(rows * dim), rng);
      // The CPU: the product of the stored rows, each output row's values then put in the standard order.
      std::vector<float> cpu = product(x, w, rows, dim);
      reorder_values(cpu.data(), rows, standard_order(*runs, out));
      // The upload: the weight's rows in the standard order, then the product.
      const std::vector<float> w_std = floats_of(standard_rows(*runs, bytes_of(w), dim * int64_t{sizeof(float)}));
      CHECK(product(x, w_std, rows, dim) == cpu);

      // Q8_0 rows moved as whole rows of blocks decode to the reordered values of the stored blocks.
      const int64_t q_row = row_bytes(DType::kQ8_0, dim);
      std::vector<uint8_t> blocks(static_cast<size_t>(out * q_row));
      for (int64_t r = 0; r < out; ++r) quantize_q8_0(&w[r * dim], dim, &blocks[r * q_row]);
      auto decode = [&](const std::vector<uint8_t>& b) {
        TensorView t;
        t.dtype = DType::kQ8_0;
        t.rows = out;
        t.cols = dim;
        t.data = b.data();
        std::vector<float> v(static_cast<size_t>(out * dim));
        tensor_rows_to_f32(t, 0, out, v.data());
        return v;
      };
      const std::vector<float> decoded = decode(blocks);
      const std::vector<float> decoded_std = floats_of(standard_rows(*runs, bytes_of(decoded), dim * int64_t{sizeof(float)}));
      CHECK(decode(standard_rows(*runs, blocks, q_row)) == decoded_std);
    }
  }
}

TEST_CASE("DeltaNet layout: Qwen3.5's value heads between Hugging Face's grouped order and llama.cpp's tiled one") {
  const DeltaNetSizes d = small_sizes();  // 2 key heads, 6 value heads
  // llama.cpp's converter: arange(6).reshape(2 key heads, 3).permute(1, 0) -> tiled head g holds grouped idx[g]
  const std::vector<int32_t> to_tiled = {0, 3, 1, 4, 2, 5};
  CHECK(value_head_sources(d, false, true) == to_tiled);
  const std::vector<int32_t> back = value_head_sources(d, true, false);
  for (int h = 0; h < d.num_v_heads; ++h) CHECK(to_tiled[static_cast<size_t>(back[static_cast<size_t>(h)])] == h);
  DeltaNetSizes tiled = d, grouped = d;
  tiled.tiled_heads = true;
  for (int g = 0; g < d.num_v_heads; ++g) {  // a tiled head reads the key head its grouped source read
    CHECK(tiled.key_head_of(g) == grouped.key_head_of(to_tiled[static_cast<size_t>(g)]));
  }
  std::vector<int32_t> identity(static_cast<size_t>(d.num_v_heads));
  std::iota(identity.begin(), identity.end(), 0);
  CHECK(value_head_sources(d, true, true) == identity);
  CHECK(value_head_sources(d, false, false) == identity);
}

}  // namespace cbatch
