// Conversion of stored tensors to fp32 (tensor.cpp): hand-built F16, BF16, Q8_0, Q4_0 and Q4_1 rows
// with known values, read from a row offset so that the row stride is exercised too.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "engine/model/tensor.hpp"
#include "test_blocks.hpp"

namespace cbatch {
namespace {

void put_u16(std::vector<uint8_t>& bytes, uint16_t v) {
  bytes.push_back(static_cast<uint8_t>(v & 0xFF));
  bytes.push_back(static_cast<uint8_t>(v >> 8));
}

TensorView view_of(const std::vector<uint8_t>& bytes, DType dtype, int64_t rows, int64_t cols) {
  REQUIRE(static_cast<int64_t>(bytes.size()) == rows * row_bytes(dtype, cols));
  return testing::blocks_view(bytes, dtype, rows, cols);
}

// Two rows of one quantization block each; row 0 is poison, row 1 is `block`.
std::vector<float> second_row(DType dtype, const std::vector<uint8_t>& block) {
  std::vector<uint8_t> bytes(block.size(), 0xFF);
  bytes.insert(bytes.end(), block.begin(), block.end());
  std::vector<float> out(32);
  tensor_rows_to_f32(view_of(bytes, dtype, 2, 32), 1, 1, out.data());
  return out;
}

}  // namespace

TEST_CASE("f16_to_f32 gives the exact value of every half") {
  for (uint32_t h = 0; h <= 0xFFFF; ++h) {
    CAPTURE(h);
    const int sign = h >> 15, exponent = (h >> 10) & 0x1F, mantissa = h & 0x3FF;
    const float value = f16_to_f32(static_cast<uint16_t>(h));
    REQUIRE(std::signbit(value) == (sign == 1));
    if (exponent == 31) {
      REQUIRE((mantissa == 0 ? std::isinf(value) : std::isnan(value)));
      continue;
    }
    const double magnitude = exponent == 0 ? std::ldexp(mantissa, -24) : std::ldexp(1024 + mantissa, exponent - 25);
    REQUIRE(std::fabs(static_cast<double>(value)) == magnitude);
  }
}

TEST_CASE("dequantize F16 and BF16 incl. subnormals and infinities") {
  std::vector<uint8_t> f16;
  for (uint16_t h : {0x3C00, 0xC000, 0x3555, 0x0001, 0x8000, 0x7C00, 0x7BFF, 0x0400}) put_u16(f16, h);
  std::vector<float> out(8);
  tensor_rows_to_f32(view_of(f16, DType::kF16, 2, 4), 0, 2, out.data());
  CHECK(out[0] == 1.0f);
  CHECK(out[1] == -2.0f);
  CHECK(out[2] == doctest::Approx(0.33325195f).epsilon(1e-7));
  CHECK(out[3] == std::ldexp(1.0f, -24));  // smallest subnormal
  CHECK(std::signbit(out[4]));
  CHECK(out[5] == std::numeric_limits<float>::infinity());
  CHECK(out[6] == 65504.0f);
  CHECK(out[7] == std::ldexp(1.0f, -14));

  std::vector<uint8_t> bf16;
  for (uint16_t h : {0x3F80, 0xC040, 0x4049, 0x0000}) put_u16(bf16, h);
  tensor_rows_to_f32(view_of(bf16, DType::kBF16, 1, 4), 0, 1, out.data());
  CHECK(out[0] == 1.0f);
  CHECK(out[1] == -3.0f);
  CHECK(out[2] == 3.140625f);
  CHECK(out[3] == 0.0f);
}

TEST_CASE("dequantize Q8_0: d * q") {
  std::vector<uint8_t> block;
  put_u16(block, 0x3800);  // d = 0.5
  for (int i = 0; i < 32; ++i) block.push_back(static_cast<uint8_t>(static_cast<int8_t>(i * 8 - 128)));
  const std::vector<float> out = second_row(DType::kQ8_0, block);
  for (int i = 0; i < 32; ++i) CHECK(out[i] == 0.5f * static_cast<float>(i * 8 - 128));
}

TEST_CASE("dequantize Q4_0: (nibble - 8) * d, low nibbles first") {
  std::vector<uint8_t> block;
  put_u16(block, 0x4000);  // d = 2
  for (int i = 0; i < 16; ++i) block.push_back(static_cast<uint8_t>(i | ((15 - i) << 4)));
  const std::vector<float> out = second_row(DType::kQ4_0, block);
  for (int i = 0; i < 16; ++i) {
    CHECK(out[i] == 2.0f * static_cast<float>(i - 8));
    CHECK(out[i + 16] == 2.0f * static_cast<float>(7 - i));
  }
}

TEST_CASE("dequantize Q4_1: nibble * d + m") {
  std::vector<uint8_t> block;
  put_u16(block, 0x3800);  // d = 0.5
  put_u16(block, 0xBC00);  // m = -1
  for (int i = 0; i < 16; ++i) block.push_back(static_cast<uint8_t>((i % 16) | (((i + 3) % 16) << 4)));
  const std::vector<float> out = second_row(DType::kQ4_1, block);
  for (int i = 0; i < 16; ++i) {
    CHECK(out[i] == 0.5f * static_cast<float>(i) - 1.0f);
    CHECK(out[i + 16] == 0.5f * static_cast<float>((i + 3) % 16) - 1.0f);
  }
}

TEST_CASE("row_bytes of block types rejects partial blocks") {
  CHECK(row_bytes(DType::kQ8_0, 64) == 68);
  CHECK(row_bytes(DType::kQ4_1, 32) == 20);
  CHECK(row_bytes(DType::kBF16, 3) == 6);
  CHECK_THROWS(row_bytes(DType::kQ4_0, 48));
}

}  // namespace cbatch
