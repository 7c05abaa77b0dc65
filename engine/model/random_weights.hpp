// Dummy weights: a counter-based generator, element i of a tensor depends only on (seed, i), so the
// CPU and the CUDA backend (which generates on the device) build bit-identical weights without ever
// storing them. Values are uniform in [-1, 1) before RandomInit's scale and offset. Dummy MXFP4 experts
// (--dummy-dtype mxfp4) are generated as their blocks instead: block b of a tensor depends only on
// (seed, b), its 32 codes uniform over the 16 FP4 codes, its E8M0 exponent picked from the tensor's scale.
#pragma once
#include <cmath>
#include <cstdint>

#include "engine/base/host_device.hpp"
#include "engine/base/splitmix64.hpp"

namespace cbatch {

// 64 hashed bits of element (or block word) `index` of the tensor with this seed.
CBATCH_HOST_DEVICE inline uint64_t random_bits(uint64_t seed, uint64_t index) {
  return splitmix64(seed ^ splitmix64(index));
}

// Uniform in [-1, 1) with 24 bits of resolution; every step is exact in fp32.
CBATCH_HOST_DEVICE inline float random_weight(uint64_t seed, uint64_t index) {
  uint32_t bits = static_cast<uint32_t>(random_bits(seed, index) >> 40);  // 24 bits
  float u = static_cast<float>(bits) * (1.0f / 16777216.0f);
  return 2.0f * u - 1.0f;
}

// The value of element `index` of a random tensor (explicit fma: identical on host and device).
CBATCH_HOST_DEVICE inline float random_element(uint64_t seed, float scale, float offset,
                                               uint64_t index) {
  return fmaf(random_weight(seed, index), scale, offset);
}

// The E8M0 exponent e0 of a random MXFP4 tensor whose f32 twin is uniform with this scale (std scale /
// sqrt(3)). A block's values are 2^(e - 128) * c, c uniform over the doubled FP4 codes {0, 1, 2, 3, 4, 6,
// 8, 12} with a random sign (rms sqrt(274 / 8) = 5.85), and e is e0 or e0 - 1 (mean square x 0.625), so
// the rms is 4.63 * 2^(e0 - 128); e0 = 125 + round(log2(scale)) makes it scale / 8.01 * 2^(round - exact),
// within a factor sqrt(2) of scale / sqrt(3). frexpf is exact, so host and device agree.
CBATCH_HOST_DEVICE inline int random_mxfp4_exponent(float scale) {
  int x = 0;
  const float m = frexpf(scale, &x);  // scale = m * 2^x, m in [0.5, 1)
  const int log2_rounded = m >= 0.70710678f ? x : x - 1;
  const int e0 = 125 + log2_rounded;
  return e0 < 2 ? 2 : (e0 > 254 ? 254 : e0);
}

// Block `block` (17 bytes: E8M0 exponent, 16 bytes of nibbles) of a random MXFP4 tensor: its codes are
// two words of hashed bits, its exponent e0 less one hashed bit (so that decoders must read each block's).
CBATCH_HOST_DEVICE inline void random_mxfp4_block(uint64_t seed, int e0, uint64_t block, uint8_t* out) {
  const uint64_t lo = random_bits(seed, 3 * block), hi = random_bits(seed, 3 * block + 1);
  out[0] = static_cast<uint8_t>(e0 - static_cast<int>(random_bits(seed, 3 * block + 2) >> 63));
  for (int i = 0; i < 8; ++i) {
    out[1 + i] = static_cast<uint8_t>(lo >> (8 * i));
    out[9 + i] = static_cast<uint8_t>(hi >> (8 * i));
  }
}

// Blocks [first, first + count) of a random MXFP4 tensor into out (count * 17 bytes): a row-major
// (rows, cols) tensor's row r holds blocks [r * cols / 32, (r + 1) * cols / 32).
inline void random_mxfp4_blocks(uint64_t seed, float scale, uint64_t first, int64_t count, uint8_t* out) {
  const int e0 = random_mxfp4_exponent(scale);
  for (int64_t b = 0; b < count; ++b) random_mxfp4_block(seed, e0, first + static_cast<uint64_t>(b), out + 17 * b);
}

}  // namespace cbatch
