// Inputs of the tests of linear weights kept in blocks (the emulated block GEMM, the GPU LinearRunner): every block
// type the block GEMM reads, and random blocks of one with their values by the engine's decoder.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "engine/model/quant_blocks.hpp"
#include "engine/model/tensor.hpp"
#include "tests/engine/test_blocks.hpp"

namespace cbatch::test {

// The block types a linear weight stays in (expert_blocks_supported): the 32-element ones, then the K-quants.
inline constexpr DType kLinearBlockTypes[] = {DType::kMXFP4, DType::kQ8_0,   DType::kQ4_0, DType::kQ4_1,
                                              DType::kQ5_0,  DType::kQ5_1,   DType::kIQ4_NL, DType::kQ4_Z,
                                              DType::kQ8_Z,  DType::kFP8,    DType::kNVFP4, DType::kQ4_K,
                                              DType::kQ5_K,  DType::kQ6_K};

// Random blocks (rows, k) of `dtype` (test_blocks.hpp's; FP8's fp32 scales set to 2^-10..2^-5 of either sign and
// its codes to finite ones) and, in values (rows, k), their values by the engine's decoder.
inline std::vector<uint8_t> linear_blocks(DType dtype, int64_t rows, int64_t k, unsigned seed,
                                          std::vector<float>& values) {
  std::vector<uint8_t> bytes = cbatch::testing::random_blocks(dtype, rows, k, seed);
  if (dtype == DType::kFP8) {
    std::mt19937 rng(seed);
    for (size_t at = 0; at < bytes.size(); at += 36) {
      const float s = std::ldexp(1.0f + static_cast<float>(rng() % 256) / 256.0f, -10 + static_cast<int>(rng() % 6)) *
                      ((rng() & 1) ? -1.0f : 1.0f);
      std::memcpy(&bytes[at], &s, 4);
      for (size_t i = at + 4; i < at + 36; ++i) bytes[i] = (bytes[i] & 0x7F) == 0x7F ? bytes[i] ^ 1 : bytes[i];
    }
  }
  values.resize(static_cast<size_t>(rows * k));
  dequantize_blocks(dtype, bytes.data(), rows * k / dtype_block_elems(dtype), values.data());
  return bytes;
}

}  // namespace cbatch::test
