// splitmix64: a 64-bit counter hash (Steele, Lea and Flood), the one source of reproducible randomness:
// dummy weights (model/random_weights.hpp, on the host and the device) and the sampler's draws
// (sample/sampler.cpp) hash (seed, index) with it, so no generator state is kept anywhere.
#pragma once
#include <cstdint>

#include "engine/base/host_device.hpp"

namespace cbatch {

CBATCH_HOST_DEVICE inline uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace cbatch
