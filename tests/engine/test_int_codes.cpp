// Pre-quantized integer Linears kept as GGUF blocks (int_codes.hpp): the block type chosen by the codes'
// range and the scales, blocks that decode to exactly the dequantized weights (act-order inputs permuted
// into groups and put back by tensor_rows_to_f32), and the CPU's int8 product on them: the bits of the same
// blocks' product with the activations permuted by hand (the GGUF path), batch-invariant, and within the
// 2% of the exact fp32 product that the int8 tests allow the 32-k block types (test_cpu_matmul_int8.cpp).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <tuple>
#include <utility>
#include <vector>

#include "engine/base/thread_pool.hpp"
#include "engine/cpu/cpu_pack.hpp"
#include "engine/model/int_codes.hpp"
#include "engine/model/quant_blocks.hpp"
#include "test_blocks.hpp"

namespace cbatch {
namespace {

// Random codes in [lo, hi], fp16 scales, groups of group_rows inputs (act-order: a permutation's groups).
IntCodes random_codes(int64_t out, int64_t in, int64_t group_rows, int lo, int hi, bool act_order, unsigned seed) {
  std::mt19937 rng(seed);
  IntCodes c;
  c.out = out, c.in = in, c.num_groups = in / group_rows;
  c.codes.resize(static_cast<size_t>(out * in));
  std::uniform_int_distribution<int> code(lo, hi);
  for (int16_t& q : c.codes) q = static_cast<int16_t>(code(rng));
  std::uniform_real_distribution<float> scale(0.001f, 0.05f);
  for (int64_t i = 0; i < out * c.num_groups; ++i) {
    const uint16_t h = float_to_half(scale(rng));
    const uint8_t bytes[2] = {static_cast<uint8_t>(h & 0xFF), static_cast<uint8_t>(h >> 8)};
    c.scales.push_back(load_half(bytes));
  }
  std::vector<int32_t> perm(static_cast<size_t>(in));
  for (int64_t k = 0; k < in; ++k) perm[static_cast<size_t>(k)] = static_cast<int32_t>(k);
  if (act_order) std::shuffle(perm.begin(), perm.end(), rng);
  c.groups.resize(static_cast<size_t>(in));
  for (int64_t k = 0; k < in; ++k) {
    c.groups[static_cast<size_t>(perm[static_cast<size_t>(k)])] = static_cast<int32_t>(k / group_rows);
  }
  return c;
}

std::vector<float> values_of(const TensorView& t) {
  std::vector<float> w(static_cast<size_t>(t.rows * t.cols));
  tensor_rows_to_f32(t, 0, t.rows, w.data());
  return w;
}

TEST_CASE("integer codes take the smallest GGUF block type that holds them exactly") {
  CHECK(int_codes_block_type(random_codes(4, 64, 32, -8, 7, false, 1)) == DType::kQ4_0);
  CHECK(int_codes_block_type(random_codes(4, 64, 32, -15, 15, true, 2)) == DType::kQ5_0);
  CHECK(int_codes_block_type(random_codes(4, 64, 64, -128, 127, false, 3)) == DType::kQ8_0);
  CHECK(int_codes_block_type(random_codes(4, 64, 16, -8, 7, false, 4)) == DType::kF32);  // groups of 16 inputs
  CHECK(int_codes_block_type(random_codes(4, 64, 64, -255, 255, false, 5)) == DType::kF32);
  IntCodes c = random_codes(4, 64, 32, -8, 7, false, 6);
  c.scales[3] = 1e-6f;  // not an fp16 number
  CHECK(int_codes_block_type(c) == DType::kF32);
}

TEST_CASE("the blocks decode to the dequantized weights, bit for bit, act-order inputs back in place") {
  for (const bool act_order : {false, true}) {
    for (const auto& range : {std::tuple{-8, 7, DType::kQ4_0}, std::tuple{-16, 15, DType::kQ5_0},
                              std::tuple{-128, 127, DType::kQ8_0}}) {
      const auto [lo, hi, dtype] = range;
      const auto type_name = dtype_name(dtype);  // (CAPTURE's lambda may not name a binding)
      CAPTURE(act_order);
      CAPTURE(type_name);
      const IntCodes c = random_codes(24, 128, 32, lo, hi, act_order, 7);
      const OwnedTensor t = int_codes_tensor("w", c);
      CHECK(t.view.dtype == dtype);
      CHECK((t.view.input_order != nullptr) == act_order);
      const std::vector<float> want = int_codes_dequantize(c), got = values_of(t.view);
      CHECK(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)) == 0);
    }
  }
}

TEST_CASE("the int8 product of act-order blocks is the GGUF blocks' product on permuted inputs") {
  ThreadPool pool(2);
  const int64_t out = 200, in = 512, max_m = 9;
  for (const auto& range : {std::pair{-8, 7}, std::pair{-16, 15}, std::pair{-128, 127}}) {
    const auto [lo, hi] = range;
    const int low = lo;  // (CAPTURE's lambda may not name a binding)
    CAPTURE(low);
    const IntCodes c = random_codes(out, in, 128, lo, hi, true, 11);
    const OwnedTensor t = int_codes_tensor("w", c);
    REQUIRE(t.view.input_order != nullptr);
    TensorView stored = t.view;  // the same blocks as a plain GGUF tensor of permuted inputs
    stored.input_order = nullptr;
    const PackedMatrix ordered = pack_stacked({&t.view}, pool, {true, true, false});
    const PackedMatrix plain = pack_stacked({&stored}, pool, {true, true, false});
    REQUIRE(ordered.input_order() != nullptr);
    const std::vector<float> x = testing::random_activations(static_cast<size_t>(max_m * in), 5);
    std::vector<float> x_permuted(x.size());
    for (int64_t i = 0; i < max_m; ++i) {
      for (int64_t j = 0; j < in; ++j) {
        x_permuted[static_cast<size_t>(i * in + j)] = x[static_cast<size_t>(i * in + t.view.input_order[j])];
      }
    }
    std::vector<float> y(static_cast<size_t>(max_m * out), NAN), y_plain(y.size(), NAN), y_alone(y.size(), NAN);
    matmul(x.data(), ordered, y.data(), max_m, pool);
    matmul(x_permuted.data(), plain, y_plain.data(), max_m, pool);
    CHECK(std::memcmp(y.data(), y_plain.data(), y.size() * sizeof(float)) == 0);
    for (int64_t i = 0; i < max_m; ++i) {  // each row alone: the same bits
      matmul(&x[static_cast<size_t>(i * in)], ordered, &y_alone[static_cast<size_t>(i * out)], 1, pool);
    }
    CHECK(std::memcmp(y.data(), y_alone.data(), y.size() * sizeof(float)) == 0);
    const std::vector<float> w = int_codes_dequantize(c);  // (out, in) in the inputs' order
    const testing::ProductError e = testing::product_error(x, w, y, max_m, out, in);
    MESSAGE("codes [" << lo << ", " << hi << "]: int8 vs the float64 product, relative error "
                      << e.relative());
    CHECK(e.relative() < 0.02);
    CHECK(e.err > 0.0);  // the 8-bit path ran
  }
}

TEST_CASE("stacked act-order parts keep their own orders; exact packing expands them in order") {
  ThreadPool pool(2);
  const IntCodes a = random_codes(32, 256, 128, -8, 7, true, 21), b = random_codes(16, 256, 128, -16, 15, true, 22);
  const OwnedTensor ta = int_codes_tensor("a", a), tb = int_codes_tensor("b", b);
  const PackedMatrix fused = pack_stacked({&ta.view, &tb.view}, pool, {true, true, false});
  const PackedMatrix alone_a = pack_stacked({&ta.view}, pool, {true, true, false});
  const PackedMatrix alone_b = pack_stacked({&tb.view}, pool, {true, true, false});
  const std::vector<float> x = testing::random_activations(static_cast<size_t>(3 * 256), 9);
  std::vector<float> y(3 * 48), ya(3 * 32), yb(3 * 16);
  matmul(x.data(), fused, y.data(), 3, pool);
  matmul(x.data(), alone_a, ya.data(), 3, pool);
  matmul(x.data(), alone_b, yb.data(), 3, pool);
  for (int i = 0; i < 3; ++i) {
    CHECK(std::memcmp(&y[static_cast<size_t>(i * 48)], &ya[static_cast<size_t>(i * 32)], 32 * sizeof(float)) == 0);
    CHECK(std::memcmp(&y[static_cast<size_t>(i * 48 + 32)], &yb[static_cast<size_t>(i * 16)], 16 * sizeof(float)) == 0);
  }
  const PackedMatrix exact = pack_stacked({&ta.view, &tb.view}, pool, {true, false, false});
  CHECK_FALSE(exact.is_blocked());  // fp32, the inputs in their order
  std::vector<float> ye(3 * 48);
  matmul(x.data(), exact, ye.data(), 3, pool);
  std::vector<float> w = int_codes_dequantize(a), wb = int_codes_dequantize(b);
  w.insert(w.end(), wb.begin(), wb.end());
  std::vector<float> yr(3 * 48);
  matmul_ref(x.data(), w.data(), yr.data(), 3, 48, 256);
  CHECK(std::memcmp(ye.data(), yr.data(), ye.size() * sizeof(float)) == 0);
}

}  // namespace
}  // namespace cbatch
