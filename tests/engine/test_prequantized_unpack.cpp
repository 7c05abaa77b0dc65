// Pre-quantized Hugging Face Linear weights (gptq.hpp, awq.hpp, fp8_hf.hpp) on small hand-made tensors whose
// expansions are written out here: GPTQ's codes along the input from the low bits up, its v1 zeros plus 1 and
// its g_idx groups, 8-bit words; AWQ's nibble order [0, 2, 4, 6, 1, 3, 5, 7]; FP8 codes times the scale of
// their block, partial edge blocks included; compressed-tensors pack-quantized codes along the input offset
// by 2^(bits - 1), its zero points packed along the output; NVFP4's E2M1 nibbles (the even input low) times
// their 16-block's E4M3 scale divided by the global scale; FP8 kept as kFP8 blocks decodes to exactly
// fp8_dequantize's values, and packs for the 8-bit product as the Q8_0 blocks of those values. (Whole models
// in each format: tests/e2e/test_prequantized.py.)
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <optional>
#include <random>
#include <vector>

#include "engine/base/thread_pool.hpp"
#include "engine/cpu/cpu_pack.hpp"
#include "engine/model/awq.hpp"
#include "engine/model/fp8.hpp"
#include "engine/model/fp8_hf.hpp"
#include "engine/model/gptq.hpp"
#include "engine/model/nvfp4_hf.hpp"
#include "engine/model/pack_quantized.hpp"
#include "engine/model/quant_blocks.hpp"

namespace cbatch {
namespace {

TEST_CASE("GPTQ 4-bit: codes along the input, v1 zeros plus 1, one group") {
  GptqShape s;
  s.bits = 4, s.in = 8, s.out = 2, s.num_groups = 1, s.zero_offset = 1;
  const std::vector<uint32_t> qweight = {0x76543210u, 0xFEDCBA98u};  // (in / 8, out): input k's code in bits 4k
  const std::vector<uint32_t> qzeros = {0x00000003u};                 // column 0 stores 3 (zero 4), column 1 0 (1)
  const std::vector<float> scales = {1.0f, 0.5f};
  const std::vector<int32_t> g_idx(8, 0);
  std::vector<float> w(16, -99.0f);
  gptq_dequantize(s, qweight.data(), qzeros.data(), scales.data(), g_idx.data(), w.data());
  const std::vector<float> expected = {-4, -3, -2, -1, 0, 1, 2, 3,             // codes 0..7 minus 4
                                       3.5, 4, 4.5, 5, 5.5, 6, 6.5, 7};     // codes 8..15 minus 1, times 0.5
  CHECK(w == expected);
  s.zero_offset = 0;  // gptq_v2: the zeros as stored
  gptq_dequantize(s, qweight.data(), qzeros.data(), scales.data(), g_idx.data(), w.data());
  CHECK(w[0] == -3.0f);
  CHECK(w[8] == 4.0f);
}

TEST_CASE("GPTQ 4-bit: each input row takes the scale and zero of its g_idx group") {
  GptqShape s;
  s.bits = 4, s.in = 8, s.out = 8, s.num_groups = 2, s.zero_offset = 1;
  std::vector<uint32_t> qweight(8, 0x55555555u);                      // every code 5
  const std::vector<uint32_t> qzeros = {0x00000000u, 0x22222222u};      // zeros 1 (group 0), 3 (group 1)
  std::vector<float> scales(16, 1.0f);
  for (int o = 0; o < 8; ++o) scales[8 + o] = 10.0f;
  const std::vector<int32_t> g_idx = {0, 1, 1, 0, 1, 0, 0, 1};          // act-order: not k / 4
  std::vector<float> w(64, -99.0f);
  gptq_dequantize(s, qweight.data(), qzeros.data(), scales.data(), g_idx.data(), w.data());
  for (int o = 0; o < 8; ++o) {
    for (int k = 0; k < 8; ++k) CHECK(w[o * 8 + k] == (g_idx[k] == 0 ? 4.0f : 20.0f));
  }
}

TEST_CASE("GPTQ 8-bit: four codes a word") {
  GptqShape s;
  s.bits = 8, s.in = 4, s.out = 1, s.num_groups = 1, s.zero_offset = 1;
  const std::vector<uint32_t> qweight = {0x83828180u};  // codes 128, 129, 130, 131
  const std::vector<uint32_t> qzeros = {0x7F7F7F7Fu};   // symmetric v1: 127 stored, zero 128
  const std::vector<float> scales = {0.25f};
  const std::vector<int32_t> g_idx(4, 0);
  std::vector<float> w(4);
  gptq_dequantize(s, qweight.data(), qzeros.data(), scales.data(), g_idx.data(), w.data());
  CHECK(w == std::vector<float>{0.0f, 0.25f, 0.5f, 0.75f});
}

TEST_CASE("AWQ: nibble i of a word is output column [0, 2, 4, 6, 1, 3, 5, 7][i]") {
  const std::vector<uint32_t> qweight = {0x76543210u, 0xFEDCBA98u};  // (in 2, out / 8 1): nibble i holds i
  const std::vector<uint32_t> qzeros = {0x11111111u};                 // (groups 1, 1): every zero 1
  std::vector<float> scales(8, 2.0f);
  std::vector<float> w(16, -99.0f);
  awq_dequantize(2, 8, 2, qweight.data(), qzeros.data(), scales.data(), w.data());
  // column o's code for input 0 is the nibble that holds it: columns 0..7 <- nibbles 0, 4, 1, 5, 2, 6, 3, 7
  const int nibble_of_column[8] = {0, 4, 1, 5, 2, 6, 3, 7};
  for (int o = 0; o < 8; ++o) {
    CHECK(w[o * 2 + 0] == 2.0f * static_cast<float>(nibble_of_column[o] - 1));
    CHECK(w[o * 2 + 1] == 2.0f * static_cast<float>(nibble_of_column[o] + 8 - 1));
  }
}

TEST_CASE("FP8: E4M3 codes times the scale of their block, edge blocks partial") {
  // (3, 3) weights in blocks of (2, 2): scales (2, 2); codes 0x38 = 1, 0x40 = 2, 0xB8 = -1, 0x01 = 2^-9
  const std::vector<uint8_t> codes = {0x38, 0x40, 0xB8,  //
                                      0x01, 0x38, 0x38,  //
                                      0x40, 0xB8, 0x00};
  const std::vector<float> scales = {1.0f, 2.0f, 3.0f, 4.0f};
  std::vector<float> w(9, -99.0f);
  fp8_dequantize(3, 3, 2, 2, codes.data(), scales.data(), w.data());
  const std::vector<float> expected = {1, 2, -2,  //
                                       1.0f / 512, 1, 2,  //
                                       6, -3, 0};
  CHECK(w == expected);
  fp8_dequantize(3, 3, 3, 3, codes.data(), scales.data() + 1, w.data());  // one scale for the tensor: 2
  CHECK(w[1] == 4.0f);
  CHECK(w[7] == -2.0f);
}

TEST_CASE("FP8 blocks: every E4M3 code times its block's scale, bit for bit, and Q8_0 panels on the 8-bit path") {
  // 40 rows of 96 inputs: every non-NaN code appears, scales per (8, 32) block over four decades.
  const int64_t out = 40, in = 96, block_rows = 8, block_cols = 32;
  std::mt19937 rng(11);
  std::vector<uint8_t> codes(static_cast<size_t>(out * in));
  for (size_t i = 0; i < codes.size(); ++i) {
    uint8_t c = static_cast<uint8_t>(i < 256 ? i : rng() & 0xFF);
    if ((c & 0x7F) == 0x7F) c ^= 1;  // NaN codes are refused at load
    codes[i] = c;
  }
  std::vector<float> scales(static_cast<size_t>((out / block_rows) * (in / block_cols)));
  std::uniform_real_distribution<float> exponent(-6.0f, -2.0f);
  for (float& s : scales) s = std::pow(10.0f, exponent(rng));
  std::vector<float> want(codes.size()), got(codes.size());
  fp8_dequantize(out, in, block_rows, block_cols, codes.data(), scales.data(), want.data());
  const OwnedTensor t = fp8_blocks("w", out, in, block_rows, block_cols, codes.data(), scales.data());
  REQUIRE(t.view.dtype == DType::kFP8);
  CHECK(t.bytes->size() == static_cast<size_t>(out * in / 32 * 36));
  tensor_rows_to_f32(t.view, 0, out, got.data());
  // Bit for bit, but for -0 (code 0x80), which the blocks decode as +0.
  int differ = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const bool same = std::memcmp(&got[i], &want[i], sizeof(float)) == 0 || (codes[i] == 0x80 && got[i] == 0.0f);
    differ += !same;
  }
  CHECK(differ == 0);
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7F) != 0x7F) CHECK(static_cast<float>(e4m3_value_x512(c)) / 512.0f == fp8_e4m3_to_float(static_cast<uint8_t>(c)));
  }

  // Packed for the 8-bit product: the matrix is the Q8_0 blocks of the decoded rows (the same products as
  // packing those blocks directly); for fp32, the decoded values themselves.
  ThreadPool pool(1);
  const PackedMatrix fast = pack_stacked({&t.view}, pool, Packing{true, true, false});
  CHECK(fast.is_int8());
  CHECK(fast.dtype() == DType::kQ8_0);
  std::vector<uint8_t> q8(static_cast<size_t>(row_bytes(DType::kQ8_0, in) * out));
  quantize_q8_0(want.data(), out * in, q8.data());
  const PackedMatrix direct(out, in, DType::kQ8_0, [&](int64_t r) { return q8.data() + r * row_bytes(DType::kQ8_0, in); },
                            pool, true);
  std::vector<float> x(static_cast<size_t>(3 * in)), y_fast(static_cast<size_t>(3 * out)), y_direct(y_fast.size());
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (float& v : x) v = u(rng);
  matmul(x.data(), fast, y_fast.data(), 3, pool);
  matmul(x.data(), direct, y_direct.data(), 3, pool);
  CHECK(y_fast == y_direct);
  // The exact path keeps the blocks (9 bits a weight, not fp32's 32) and gives the bits of the fp32 product of
  // the decoded weights, one row or several.
  const PackedMatrix exact = pack_stacked({&t.view}, pool, Packing{true, false, false});
  CHECK(exact.is_blocked());
  CHECK(exact.dtype() == DType::kFP8);
  CHECK(exact.bytes() * 3 < pack_stacked({&t.view}, pool, Packing{false, false, false}).bytes());  // fp32 panels
  for (int m : {1, 3}) {
    std::vector<float> y_exact(static_cast<size_t>(m * out)), y_ref(y_exact.size());
    matmul(x.data(), exact, y_exact.data(), m, pool);
    matmul_ref(x.data(), want.data(), y_ref.data(), m, out, in);
    CHECK(std::memcmp(y_exact.data(), y_ref.data(), y_ref.size() * sizeof(float)) == 0);
  }
}

TEST_CASE("pack-quantized: codes along the input minus 2^(bits - 1), or minus zeros packed along the output") {
  PackedIntShape s;
  s.bits = 4, s.in = 8, s.out = 2, s.num_groups = 2;
  const std::vector<uint32_t> packed = {0x76543210u, 0x88888888u};  // (out, in / 8): input k's code in bits 4k
  const std::vector<float> scales = {1.0f, 2.0f, 3.0f, 4.0f};        // (out, groups)
  const std::vector<int32_t> groups = {0, 0, 0, 0, 1, 1, 1, 1};
  std::vector<float> w(16, -99.0f);
  packed_int_dequantize(s, packed.data(), nullptr, scales.data(), groups.data(), w.data());  // symmetric: zero 8
  CHECK(w == std::vector<float>{-8, -7, -6, -5, -8, -6, -4, -2, 0, 0, 0, 0, 0, 0, 0, 0});
  const std::vector<uint32_t> zeros = {0x00000021u, 0x00000043u};  // (out / 8, groups): row 0 zeros 1, 3; row 1 2, 4
  packed_int_dequantize(s, packed.data(), zeros.data(), scales.data(), groups.data(), w.data());
  CHECK(w == std::vector<float>{-1, 0, 1, 2, 2, 4, 6, 8, 18, 18, 18, 18, 16, 16, 16, 16});
}

TEST_CASE("NVFP4: E2M1 nibbles, even input low, times fp8 scale / global scale per 16 inputs") {
  CHECK(e2m1_value(0x0) == 0.0f);
  CHECK(e2m1_value(0x3) == 1.5f);
  CHECK(e2m1_value(0x7) == 6.0f);
  CHECK(e2m1_value(0xD) == -3.0f);
  std::vector<uint8_t> packed(16, 0x00);  // (1, 32 / 2): one row of 32 inputs
  packed[0] = 0x72;  // inputs 0, 1: codes 2 (1.0) and 7 (6.0)
  packed[8] = 0x9B;  // inputs 16, 17: codes 11 (-1.5) and 9 (-0.5)
  packed[15] = 0x40;  // input 31: code 4 (2.0); input 30: 0
  const std::vector<uint8_t> scales = {0x38, 0x40};  // E4M3 1.0 (inputs 0-15), 2.0 (16-31)
  std::vector<float> w(32, -99.0f);
  nvfp4_dequantize(1, 32, packed.data(), scales.data(), 4.0f, w.data());  // global scale 4: divides
  CHECK(w[0] == 0.25f);
  CHECK(w[1] == 1.5f);
  CHECK(w[2] == 0.0f);
  CHECK(w[16] == -0.75f);  // -1.5 * 2 / 4
  CHECK(w[17] == -0.25f);
  CHECK(w[30] == 0.0f);
  CHECK(w[31] == 1.0f);  // 2 * 2 / 4
}

TEST_CASE("NVFP4 blocks: every code times its 16-block's scale, bit for bit (-0 as +0); a subnormal half refused") {
  const int64_t out = 6, in = 64;
  std::mt19937 rng(5);
  std::vector<uint8_t> packed(static_cast<size_t>(out * in / 2)), scales(static_cast<size_t>(out * in / 16));
  for (size_t i = 0; i < packed.size(); ++i) packed[i] = static_cast<uint8_t>(i < 128 ? i * 2 + (i >> 3) : rng());
  for (uint8_t& c : scales) c = static_cast<uint8_t>(rng() % 0x7E);  // non-negative, finite E4M3 codes
  const float global = 2688.0f / 3.7f;
  std::vector<float> want(static_cast<size_t>(out * in)), got(want.size());
  nvfp4_dequantize(out, in, packed.data(), scales.data(), global, want.data());
  const std::optional<OwnedTensor> t = nvfp4_blocks("w", out, in, packed.data(), scales.data(), global);
  REQUIRE(t.has_value());
  CHECK(t->view.dtype == DType::kNVFP4);
  CHECK(t->bytes->size() == static_cast<size_t>(out * in / 32 * 24));
  tensor_rows_to_f32(t->view, 0, out, got.data());
  int differ = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const uint8_t code = i % 2 == 0 ? packed[i / 2] & 0x0F : packed[i / 2] >> 4;
    differ += std::memcmp(&got[i], &want[i], sizeof(float)) != 0 && !(code == 8 && got[i] == 0.0f);
  }
  CHECK(differ == 0);
  // A scale whose half loses a bit (fp32 subnormals) is not kept exactly: the caller expands the tensor
  // instead. E4M3 2^-9 over 1.5 * 2^127 is 5461 * 2^-149, odd.
  const std::vector<uint8_t> tiny(scales.size(), 0x01);
  CHECK_FALSE(nvfp4_blocks("w", out, in, packed.data(), tiny.data(), std::ldexp(1.5f, 127)).has_value());
}

}  // namespace
}  // namespace cbatch
