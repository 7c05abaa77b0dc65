// Dummy weights: a counter-based generator, element i of a tensor depends only on (seed, i), so the
// CPU and the CUDA backend (which generates on the device) build bit-identical weights without ever
// storing them. Values are uniform in [-1, 1) before RandomInit's scale and offset.
#pragma once
#include <cmath>
#include <cstdint>

#include "engine/base/host_device.hpp"
#include "engine/base/splitmix64.hpp"

namespace cbatch {

// Uniform in [-1, 1) with 24 bits of resolution; every step is exact in fp32.
CBATCH_HOST_DEVICE inline float random_weight(uint64_t seed, uint64_t index) {
  uint32_t bits = static_cast<uint32_t>(splitmix64(seed ^ splitmix64(index)) >> 40);  // 24 bits
  float u = static_cast<float>(bits) * (1.0f / 16777216.0f);
  return 2.0f * u - 1.0f;
}

// The value of element `index` of a random tensor (explicit fma: identical on host and device).
CBATCH_HOST_DEVICE inline float random_element(uint64_t seed, float scale, float offset,
                                               uint64_t index) {
  return fmaf(random_weight(seed, index), scale, offset);
}

}  // namespace cbatch
