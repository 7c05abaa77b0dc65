// The FP8 GPU cases' guard: FP8 needs compute capability 8.9, and below it those cases say so and pass (the
// refusal on older GPUs has a case of its own).
#pragma once
#include <doctest/doctest.h>

#include "cuda/backend/cuda_backend.hpp"

namespace cbatch::test {

inline bool has_fp8_gpu() {
  if (cuda_compute_capability(0) >= 89) return true;
  MESSAGE("SKIPPED: " << cuda_device_description(0) << " has no FP8 (compute capability below 8.9)");
  return false;
}

}  // namespace cbatch::test
