// Random GGUF block data (Q8_0, Q4_0, Q4_1) for tests of code that reads quantized weights: scales of
// either sign, some subnormal and some zero, every code value.
#pragma once
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "engine/model/tensor.hpp"

namespace cbatch::testing {

inline std::vector<uint8_t> random_blocks(DType dtype, int64_t rows, int64_t cols, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> bytes(static_cast<size_t>(row_bytes(dtype, cols) * rows));
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
  auto scale = [&rng]() -> uint16_t {  // f16 bits: mostly 2^-8..2^-5, sometimes subnormal or zero
    const unsigned pick = rng() % 16;
    const uint16_t sign = (rng() & 1) ? 0x8000 : 0;
    if (pick == 0) return sign;
    if (pick == 1) return static_cast<uint16_t>(sign | (rng() & 0x3FF));
    return static_cast<uint16_t>(sign | (0x1C00 + rng() % 0xC00));
  };
  const int64_t block_bytes = dtype_block_bytes(dtype);
  for (size_t at = 0; at < bytes.size(); at += static_cast<size_t>(block_bytes)) {
    const uint16_t d = scale(), m = scale();
    std::memcpy(&bytes[at], &d, 2);
    if (dtype == DType::kQ4_1) std::memcpy(&bytes[at + 2], &m, 2);
  }
  return bytes;
}

// A view of stored bytes (blocks or plain elements) as a (rows, cols) tensor of `dtype`.
inline TensorView blocks_view(const std::vector<uint8_t>& bytes, DType dtype, int64_t rows, int64_t cols) {
  TensorView t;
  t.name = "blocks";
  t.dtype = dtype;
  t.rows = rows;
  t.cols = cols;
  t.data = bytes.data();
  return t;
}

}  // namespace cbatch::testing
