// Random GGUF block data (every block type) for tests of code that reads quantized weights, and random
// activations for their products: random bytes
// (every code, sub-block scale and minimum), with the f16 scales set to values of either sign, some
// subnormal and some zero, MXFP4's E8M0 scale bytes to 2^-10..2^-4, sometimes the subnormal 2^-128 or
// 2^-127, and NVFP4's and FP8's fp32 scales to 2^-10..2^-4 or zero (finite products that a matmul can sum
// without overflow; FP8's NaN codes, which the loader refuses, made finite).
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "engine/model/tensor.hpp"

namespace cbatch::testing {

// Byte offsets of a block's f16 scales (d, and dmin or m where the type has one).
inline std::vector<int> f16_offsets(DType dtype) {
  switch (dtype) {
    case DType::kQ4_1:
    case DType::kQ5_1:
    case DType::kQ4_K:
    case DType::kQ5_K: return {0, 2};
    case DType::kQ2_K: return {80, 82};
    case DType::kQ3_K: return {108};
    case DType::kQ6_K: return {208};
    case DType::kMXFP4:   // an E8M0 byte, not f16
    case DType::kFP8:     // an fp32 scale
    case DType::kNVFP4: return {};  // two fp32 scales
    default: return {0};  // Q8_0, Q4_0, Q5_0, IQ4_NL, IQ4_XS
  }
}

// Every block type (cbatch's internal Q4_Z and Q8_Z too: random zero points of every byte value).
inline constexpr DType kBlockTypes[] = {DType::kQ8_0, DType::kQ4_0, DType::kQ4_1, DType::kQ5_0,
                                        DType::kQ5_1, DType::kIQ4_NL, DType::kQ2_K, DType::kQ3_K,
                                        DType::kQ4_K, DType::kQ5_K, DType::kQ6_K, DType::kIQ4_XS,
                                        DType::kMXFP4, DType::kQ4_Z, DType::kQ8_Z, DType::kNVFP4};

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
    for (int offset : f16_offsets(dtype)) {
      const uint16_t d = scale();
      std::memcpy(&bytes[at + static_cast<size_t>(offset)], &d, 2);
    }
    if (dtype == DType::kMXFP4) {  // 2^(e - 128): e 118..124, or 0 and 1
      const unsigned pick = rng() % 16;
      bytes[at] = static_cast<uint8_t>(pick < 2 ? pick : 118 + rng() % 7);
    }
    const int fp32_scales = dtype == DType::kNVFP4 ? 2 : dtype == DType::kFP8 ? 1 : 0;
    for (int j = 0; j < fp32_scales; ++j) {  // fp32 scales 2^-10..2^-5 of either sign, or 0
      const float s = rng() % 16 == 0 ? 0.0f : std::ldexp(1.0f + static_cast<float>(rng() % 256) / 256.0f,
                                                         -10 + static_cast<int>(rng() % 6)) * ((rng() & 1) ? -1 : 1);
      std::memcpy(&bytes[at + static_cast<size_t>(4 * j)], &s, 4);
    }
    for (int e = 0; dtype == DType::kFP8 && e < 32; ++e) {
      uint8_t& code = bytes[at + 4 + static_cast<size_t>(e)];
      if ((code & 0x7F) == 0x7F) code ^= 1;
    }
  }
  return bytes;
}

// n activations, normal with an outlier (x30) every 97 values, as real activations have.
inline std::vector<float> random_activations(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist;
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  for (size_t i = 0; i < n; i += 97) v[i] *= 30.0f;
  return v;
}

// y (m, out) against the float64 product of x (m, in) and w (out, in): the squared error and the squared norm.
struct ProductError {
  double err = 0.0, norm = 0.0;
  double relative() const { return std::sqrt(err / norm); }
};
inline ProductError product_error(const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>& y,
                                  int64_t m, int64_t out, int64_t in) {
  ProductError e;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t o = 0; o < out; ++o) {
      double want = 0;
      for (int64_t k = 0; k < in; ++k) {
        want += static_cast<double>(x[static_cast<size_t>(i * in + k)]) * w[static_cast<size_t>(o * in + k)];
      }
      const double d = y[static_cast<size_t>(i * out + o)] - want;
      e.err += d * d;
      e.norm += want * want;
    }
  }
  return e;
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
