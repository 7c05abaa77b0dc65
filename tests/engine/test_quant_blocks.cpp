// The GGUF block types beyond Q8_0/Q4_0/Q4_1 (quant_blocks.hpp): blocks built element by element from
// known codes, sub-block scales and minimums (ggml's layouts, written out here a second time) decode to
// the known values; block and row sizes; the products are rounded before the offset is added; the IQ4
// table. (The gguf package's own values: tests/e2e/test_quant_types.py. The CPU matmul's blocked panels
// of every type: test_cpu_matmul.cpp. The unsupported-type error: test_gguf.cpp.)
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "engine/model/quant_blocks.hpp"
#include "test_blocks.hpp"

namespace cbatch {
namespace {

// A block and the values it must decode to (exact: the scales are powers of two, so every product and
// difference below is exact in fp32 and the order of rounding cannot matter).
struct KnownBlock {
  std::vector<uint8_t> bytes;
  std::vector<double> want;
};

class BlockBuilder {
 public:
  BlockBuilder(DType dtype, unsigned seed) : bytes_(static_cast<size_t>(dtype_block_bytes(dtype)), 0), rng_(seed) {}

  int uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  // A power of two 2^-8..2^2 of either sign, as f16 at byte `at`; returns its value.
  double half_at(int at) {
    const int exponent = uniform(-8, 2);
    const bool negative = uniform(0, 1) == 1;
    const uint16_t bits = static_cast<uint16_t>((negative ? 0x8000 : 0) | (exponent + 15) << 10);
    std::memcpy(&bytes_[static_cast<size_t>(at)], &bits, 2);
    return (negative ? -1.0 : 1.0) * std::ldexp(1.0, exponent);
  }
  void bits(int byte, int shift, int width, int value) {  // ORs value (width bits) in at a bit position
    REQUIRE((value >= 0 && value < (1 << width)));
    bytes_[static_cast<size_t>(byte)] |= static_cast<uint8_t>(value << shift);
  }
  std::vector<uint8_t> bytes() const { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
  std::mt19937 rng_;
};

constexpr int kIq4[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// Q5_0 (d, qh, qs), Q5_1 (d, m, qh, qs), IQ4_NL (d, qs): 32 elements, element e's low nibble in byte
// e % 16 (high nibble from 16 on), its fifth bit bit e of qh.
KnownBlock small_block(DType dtype, unsigned seed) {
  BlockBuilder b(dtype, seed);
  KnownBlock out;
  const double d = b.half_at(0);
  const double m = dtype == DType::kQ5_1 ? b.half_at(2) : 0.0;
  const int qh = dtype == DType::kQ5_1 ? 4 : 2, qs = dtype == DType::kQ5_1 ? 8 : dtype == DType::kQ5_0 ? 6 : 2;
  for (int e = 0; e < 32; ++e) {
    const int q = b.uniform(0, dtype == DType::kIQ4_NL ? 15 : 31);
    b.bits(qs + e % 16, 4 * (e / 16), 4, q & 15);
    if (dtype != DType::kIQ4_NL) b.bits(qh + e / 8, e % 8, 1, q >> 4);
    out.want.push_back(dtype == DType::kQ5_0 ? d * (q - 16) : dtype == DType::kQ5_1 ? d * q + m : d * kIq4[q]);
  }
  out.bytes = b.bytes();
  return out;
}

// Q2_K: scales[16] (scale | min << 4), qs[64], d, dmin; element e's 2 bits in byte 16 + (e / 128) * 32 +
// e % 32 at bit 2 * ((e % 128) / 32).
KnownBlock q2_k_block(unsigned seed) {
  BlockBuilder b(DType::kQ2_K, seed);
  KnownBlock out;
  const double d = b.half_at(80), dmin = b.half_at(82);
  int sc[16], mn[16];
  for (int j = 0; j < 16; ++j) {
    sc[j] = b.uniform(0, 15);
    mn[j] = b.uniform(0, 15);
    b.bits(j, 0, 4, sc[j]);
    b.bits(j, 4, 4, mn[j]);
  }
  for (int e = 0; e < 256; ++e) {
    const int q = b.uniform(0, 3);
    b.bits(16 + (e / 128) * 32 + e % 32, 2 * ((e % 128) / 32), 2, q);
    out.want.push_back(d * sc[e / 16] * q - dmin * mn[e / 16]);
  }
  out.bytes = b.bytes();
  return out;
}

// Q3_K: hmask[32], qs[64] (as Q2_K), scales[12], d. Value q - 4 where the hmask bit (byte e % 32, bit
// e / 32) is clear; 16 scales of 6 bits less 32: low nibbles in bytes 0..7 (j < 8 low nibble, else high),
// the top 2 bits in byte 8 + j % 4 at bit 2 * (j / 4).
KnownBlock q3_k_block(unsigned seed) {
  BlockBuilder b(DType::kQ3_K, seed);
  KnownBlock out;
  const double d = b.half_at(108);
  int sc[16];
  for (int j = 0; j < 16; ++j) {
    sc[j] = b.uniform(0, 63);
    b.bits(96 + j % 8, 4 * (j / 8), 4, sc[j] & 15);
    b.bits(104 + j % 4, 2 * (j / 4), 2, sc[j] >> 4);
  }
  for (int e = 0; e < 256; ++e) {
    const int value = b.uniform(-4, 3);
    const int high = value >= 0 ? 1 : 0, low = value + 4 - 4 * high;
    b.bits(32 + (e / 128) * 32 + e % 32, 2 * ((e % 128) / 32), 2, low);
    b.bits(e % 32, e / 32, 1, high);
    out.want.push_back(d * (sc[e / 16] - 32) * value);
  }
  out.bytes = b.bytes();
  return out;
}

// Q4_K/Q5_K: d, dmin, scales[12], (Q5_K: qh[32],) qs[128]. Sub-block j < 4: scale and min in the low 6
// bits of bytes j and j + 4; j >= 4: low 4 bits in byte j + 4 (scale low nibble, min high nibble), top
// 2 bits in bits 6-7 of bytes j - 4 (scale) and j (min). Element e (sub-block j = e / 32) in byte
// (j / 2) * 32 + e % 32 of qs, nibble j % 2; Q5_K's fifth bit: bit j of qh[e % 32].
KnownBlock q45_k_block(bool five, unsigned seed) {
  BlockBuilder b(five ? DType::kQ5_K : DType::kQ4_K, seed);
  KnownBlock out;
  const double d = b.half_at(0), dmin = b.half_at(2);
  int sc[8], mn[8];
  for (int j = 0; j < 8; ++j) {
    sc[j] = b.uniform(0, 63);
    mn[j] = b.uniform(0, 63);
    if (j < 4) {
      b.bits(4 + j, 0, 6, sc[j]);
      b.bits(4 + j + 4, 0, 6, mn[j]);
    } else {
      b.bits(4 + j + 4, 0, 4, sc[j] & 15);
      b.bits(4 + j + 4, 4, 4, mn[j] & 15);
      b.bits(4 + j - 4, 6, 2, sc[j] >> 4);
      b.bits(4 + j, 6, 2, mn[j] >> 4);
    }
  }
  for (int e = 0; e < 256; ++e) {
    const int j = e / 32, q = b.uniform(0, five ? 31 : 15);
    b.bits((five ? 48 : 16) + (j / 2) * 32 + e % 32, 4 * (j % 2), 4, q & 15);
    if (five) b.bits(16 + e % 32, j, 1, q >> 4);
    out.want.push_back(d * sc[j] * q - dmin * mn[j]);
  }
  out.bytes = b.bytes();
  return out;
}

// Q6_K: ql[128], qh[64], scales[16] (int8), d. Element e = 128 h + r: low nibble in ql byte 64 h + r % 64
// (high nibble from r = 64 on), top 2 bits in qh byte 32 h + r % 32 at bit 2 * (r / 32); value q - 32.
KnownBlock q6_k_block(unsigned seed) {
  BlockBuilder b(DType::kQ6_K, seed);
  KnownBlock out;
  const double d = b.half_at(208);
  int sc[16];
  for (int j = 0; j < 16; ++j) {
    sc[j] = b.uniform(-128, 127);
    b.bits(192 + j, 0, 8, sc[j] & 0xFF);
  }
  for (int e = 0; e < 256; ++e) {
    const int h = e / 128, r = e % 128, q = b.uniform(0, 63);
    b.bits(64 * h + r % 64, 4 * (r / 64), 4, q & 15);
    b.bits(128 + 32 * h + r % 32, 2 * (r / 32), 2, q >> 4);
    out.want.push_back(d * sc[e / 16] * (q - 32));
  }
  out.bytes = b.bytes();
  return out;
}

// IQ4_XS: d, scales_h (u16), scales_l[4], qs[128]. Sub-block j's 6-bit scale (less 32): low 4 bits in
// byte 4 + j / 2 (nibble j % 2), top 2 bits at bit 2 j of scales_h; element e in sub-block j = e / 32:
// byte 8 + 16 j + e % 16, high nibble for e % 32 >= 16.
KnownBlock iq4_xs_block(unsigned seed) {
  BlockBuilder b(DType::kIQ4_XS, seed);
  KnownBlock out;
  const double d = b.half_at(0);
  int sc[8];
  for (int j = 0; j < 8; ++j) {
    sc[j] = b.uniform(0, 63);
    b.bits(4 + j / 2, 4 * (j % 2), 4, sc[j] & 15);
    b.bits(2 + j / 4, 2 * (j % 4), 2, sc[j] >> 4);
  }
  for (int e = 0; e < 256; ++e) {
    const int j = e / 32, q = b.uniform(0, 15);
    b.bits(8 + 16 * j + e % 16, 4 * ((e % 32) / 16), 4, q);
    out.want.push_back(d * (sc[j] - 32) * kIq4[q]);
  }
  out.bytes = b.bytes();
  return out;
}

KnownBlock known_block(DType dtype, unsigned seed) {
  switch (dtype) {
    case DType::kQ2_K: return q2_k_block(seed);
    case DType::kQ3_K: return q3_k_block(seed);
    case DType::kQ4_K: return q45_k_block(false, seed);
    case DType::kQ5_K: return q45_k_block(true, seed);
    case DType::kQ6_K: return q6_k_block(seed);
    case DType::kIQ4_XS: return iq4_xs_block(seed);
    default: return small_block(dtype, seed);
  }
}

constexpr DType kNewTypes[] = {DType::kQ5_0, DType::kQ5_1, DType::kIQ4_NL, DType::kQ2_K, DType::kQ3_K,
                               DType::kQ4_K, DType::kQ5_K, DType::kQ6_K, DType::kIQ4_XS};

}  // namespace

TEST_CASE("quant blocks built from known codes and scales decode to their values") {
  for (DType dtype : kNewTypes) {
    for (unsigned seed = 1; seed <= 20; ++seed) {
      CAPTURE(dtype_name(dtype));
      CAPTURE(seed);
      const KnownBlock block = known_block(dtype, seed);
      const int64_t elems = dtype_block_elems(dtype);
      REQUIRE(static_cast<int64_t>(block.want.size()) == elems);
      // Two rows: row 0 is poison (every byte 0xFF), row 1 the block; read from the row offset.
      std::vector<uint8_t> bytes(block.bytes.size(), 0xFF);
      bytes.insert(bytes.end(), block.bytes.begin(), block.bytes.end());
      std::vector<float> got(static_cast<size_t>(elems));
      tensor_rows_to_f32(testing::blocks_view(bytes, dtype, 2, elems), 1, 1, got.data());
      int wrong = 0;
      for (int64_t e = 0; e < elems; ++e) wrong += got[e] != static_cast<float>(block.want[e]);
      CHECK(wrong == 0);
      // Element by element (the CUDA kernel's path) gives the same bits as the whole-block decode.
      with_block_format(dtype, [&](auto format) {
        using F = decltype(format);
        for (int e = 0; e < F::kElems; ++e) wrong += block_element<F>(block.bytes.data(), e) != got[e];
      });
      CHECK(wrong == 0);
    }
  }
}

TEST_CASE("quant block and row sizes are ggml's") {
  struct Size {
    DType dtype;
    int64_t elems, bytes;
  };
  for (const Size& s : {Size{DType::kQ8_0, 32, 34}, Size{DType::kQ4_0, 32, 18}, Size{DType::kQ4_1, 32, 20},
                        Size{DType::kQ5_0, 32, 22}, Size{DType::kQ5_1, 32, 24}, Size{DType::kIQ4_NL, 32, 18},
                        Size{DType::kQ2_K, 256, 84}, Size{DType::kQ3_K, 256, 110}, Size{DType::kQ4_K, 256, 144},
                        Size{DType::kQ5_K, 256, 176}, Size{DType::kQ6_K, 256, 210}, Size{DType::kIQ4_XS, 256, 136},
                        Size{DType::kMXFP4, 32, 17}}) {
    CAPTURE(dtype_name(s.dtype));
    CHECK(dtype_block_elems(s.dtype) == s.elems);
    CHECK(dtype_block_bytes(s.dtype) == s.bytes);
    CHECK(row_bytes(s.dtype, 3 * s.elems) == 3 * s.bytes);
    CHECK_THROWS_AS(row_bytes(s.dtype, s.elems + 1), Error);
  }
  CHECK(row_bytes(DType::kQ6_K, 2048) == 8 * 210);
  CHECK_THROWS(row_bytes(DType::kQ4_K, 640));  // 2.5 super-blocks
}

TEST_CASE("K-quant values round the product before the minimum is subtracted (never one fused op)") {
  // s * 3 needs 26 bits: rounded, then 3 subtracted, it leaves 4 * 2^-23; fused, the exact 3 * 2^-23.
  const float s = 1.0f + std::ldexp(1.0f, -23);
  const float got = weight_value<Formula::kScaledOffset>({s, -3.0f}, 3);
  CHECK(got == std::ldexp(4.0f, -23));
  CHECK(got != std::fma(s, 3.0f, -3.0f));
  CHECK(weight_value<Formula::kScaled>({-0.5f, 0.0f}, 0) == 0.0f);
  CHECK(std::signbit(weight_value<Formula::kScaled>({-0.5f, 0.0f}, 0)));  // -0, as numpy's d * 0
}

TEST_CASE("IQ4 values and half_to_float") {
  for (int c = 0; c < 16; ++c) CHECK(iq4_value(c) == kIq4[c]);
  for (uint32_t h = 0; h <= 0xFFFF; ++h) {
    const float a = half_to_float(static_cast<uint16_t>(h)), b = f16_to_f32(static_cast<uint16_t>(h));
    if (std::isnan(b)) {
      CHECK(std::isnan(a));
    } else {
      REQUIRE(std::memcmp(&a, &b, 4) == 0);
    }
  }
}

}  // namespace cbatch

namespace cbatch {

TEST_CASE("quantize_q8_0 round-trips within half a step, its largest value at +-127") {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> uniform(-0.04f, 0.04f);
  std::vector<float> x(96);
  for (float& v : x) v = uniform(rng);
  std::fill(x.begin() + 64, x.end(), 0.0f);  // an all-zero block
  x[7] = 0.05f;
  std::vector<uint8_t> blocks(3 * 34);
  quantize_q8_0(x.data(), 96, blocks.data());
  std::vector<float> back(96);
  dequantize_blocks(DType::kQ8_0, blocks.data(), 3, back.data());
  for (int b = 0; b < 2; ++b) {
    const float d = load_half(&blocks[b * 34]);
    CHECK(d > 0.0f);
    for (int i = 0; i < 32; ++i) CHECK(std::fabs(back[b * 32 + i] - x[b * 32 + i]) <= 0.5f * d * 1.01f);
  }
  CHECK(static_cast<int8_t>(blocks[2 + 7]) == 127);
  CHECK(load_half(&blocks[0]) == doctest::Approx(0.05f / 127).epsilon(1e-3));
  for (int i = 64; i < 96; ++i) CHECK(back[i] == 0.0f);
}

}  // namespace cbatch
