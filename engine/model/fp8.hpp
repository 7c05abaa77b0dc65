// FP8 E4M3 (the OCP "E4M3FN" format of Hopper's tensor cores and of CUDA's __nv_fp8_e4m3): 1 sign, 4
// exponent (bias 7), 3 mantissa bits; no infinities; 0x7F / 0xFF are NaN; largest finite 448, smallest
// normal 2^-6, smallest subnormal 2^-9. The conversions are plain integer and float arithmetic marked
// CBATCH_HOST_DEVICE, so the CPU reference, the block emulator and the kernels round the same way:
// round to nearest even, saturating to +-448 (CUDA's __NV_SATFINITE: infinities too), NaN becomes 0x7F.
#pragma once
#include <cstdint>
#include <cstring>

#include "engine/base/host_device.hpp"

namespace cbatch {

inline constexpr float kFp8E4M3Max = 448.0f;

CBATCH_HOST_DEVICE inline uint8_t fp8_e4m3_from_float(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  const uint8_t sign = static_cast<uint8_t>((bits >> 24) & 0x80u);
  const uint32_t mag = bits & 0x7FFFFFFFu;
  if (mag > 0x7F800000u) return 0x7Fu;  // NaN, of either sign, is 0x7F (as CUDA converts it)
  if (mag >= 0x43E00000u) return static_cast<uint8_t>(sign | 0x7Eu);  // >= 448 (and inf): saturate
  if (mag < 0x3C800000u) {  // below 2^-6: a subnormal step of 2^-9; 8 steps round up to 2^-6 (0x08)
    float a;
    std::memcpy(&a, &mag, sizeof a);
    // a * 512 is exact and below 8; adding 2^23 leaves its integer part rounded to nearest even.
    const float shifted = a * 512.0f + 8388608.0f;
    uint32_t s;
    std::memcpy(&s, &shifted, sizeof s);
    return static_cast<uint8_t>(sign | (s & 0xFu));
  }
  // Normal: keep 3 of the 23 mantissa bits, rounding the 20 dropped ones to nearest even (a carry moves
  // into the exponent), then rebias the exponent from 127 to 7.
  const uint32_t rounded = (mag + 0x7FFFFu + ((mag >> 20) & 1u)) >> 20;
  const uint32_t e4m3 = rounded - ((127u - 7u) << 3);
  return static_cast<uint8_t>(sign | (e4m3 > 0x7Eu ? 0x7Eu : e4m3));
}

CBATCH_HOST_DEVICE inline float fp8_e4m3_to_float(uint8_t v) {
  const uint32_t exponent = (v >> 3) & 0xFu;
  const uint32_t mantissa = v & 0x7u;
  float magnitude;
  if (exponent == 0xFu && mantissa == 0x7u) {
    const uint32_t nan = 0x7FC00000u;
    std::memcpy(&magnitude, &nan, sizeof magnitude);
  } else if (exponent == 0) {
    magnitude = static_cast<float>(mantissa) * (1.0f / 512.0f);
  } else {
    const uint32_t bits = ((exponent + 127u - 7u) << 23) | (mantissa << 20);
    std::memcpy(&magnitude, &bits, sizeof magnitude);
  }
  return (v & 0x80u) ? -magnitude : magnitude;
}

}  // namespace cbatch
