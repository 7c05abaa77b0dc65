// Pre-quantized Hugging Face Linear weights (gptq.hpp, awq.hpp, fp8_hf.hpp) on small hand-made tensors whose
// expansions are written out here: GPTQ's codes along the input from the low bits up, its v1 zeros plus 1 and
// its g_idx groups, 8-bit words; AWQ's nibble order [0, 2, 4, 6, 1, 3, 5, 7]; FP8 codes times the scale of
// their block, partial edge blocks included; compressed-tensors pack-quantized codes along the input offset
// by 2^(bits - 1), its zero points packed along the output; NVFP4's E2M1 nibbles (the even input low) times
// their 16-block's E4M3 scale divided by the global scale. (Whole models in each format: tests/e2e/test_prequantized.py.)
#include <doctest/doctest.h>

#include <vector>

#include "engine/model/awq.hpp"
#include "engine/model/fp8_hf.hpp"
#include "engine/model/gptq.hpp"
#include "engine/model/nvfp4_hf.hpp"
#include "engine/model/pack_quantized.hpp"

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

}  // namespace
}  // namespace cbatch
