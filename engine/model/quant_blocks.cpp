// Host decoding of GGUF blocks to fp32 through the element formulas of quant_blocks.hpp.
#include "engine/model/quant_blocks.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace cbatch {

void dequantize_blocks(DType dtype, const uint8_t* blocks, int64_t num_blocks, float* out) {
  with_block_format(dtype, [&](auto format) {
    using F = decltype(format);
    for (int64_t b = 0; b < num_blocks; ++b) decode_block<F>(blocks + b * F::kBytes, out + b * F::kElems);
  });
}

uint16_t float_to_half(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000);
  const int exponent = static_cast<int>((bits >> 23) & 0xFF) - 127 + 15;
  if (exponent <= 0) return sign;
  if (exponent >= 31) return sign | 0x7BFF;
  uint32_t h = static_cast<uint32_t>(exponent) << 10 | (bits >> 13 & 0x3FF);
  const uint32_t rest = bits & 0x1FFF;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) ++h;  // a carry into the exponent is still right
  return static_cast<uint16_t>(sign | std::min<uint32_t>(h, 0x7BFF));
}

void quantize_q8_0(const float* x, int64_t n, uint8_t* out) {
  for (int64_t b = 0; b < n / 32; ++b, x += 32, out += 34) {
    float amax = 0.0f;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[i]));
    const uint16_t d = float_to_half(amax / 127.0f);
    out[0] = static_cast<uint8_t>(d & 0xFF);
    out[1] = static_cast<uint8_t>(d >> 8);
    const float scale = half_to_float(d), inverse = scale > 0.0f ? 1.0f / scale : 0.0f;
    for (int i = 0; i < 32; ++i) {
      const float q = std::clamp(std::round(x[i] * inverse), -127.0f, 127.0f);
      out[2 + i] = static_cast<uint8_t>(static_cast<int8_t>(q));
    }
  }
}

}  // namespace cbatch
