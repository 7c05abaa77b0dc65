#include "engine/model/dtype.hpp"

#if defined(__F16C__)
#include <immintrin.h>
#endif

namespace cbatch {

float f16_to_f32(uint16_t h) {
#if defined(__F16C__)
  return _cvtsh_ss(h);  // the same value; a signalling NaN comes back quiet
#else
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exponent = (h >> 10) & 0x1F;
  uint32_t mantissa = h & 0x3FF;
  uint32_t bits;
  if (exponent == 0) {
    if (mantissa == 0) {
      bits = sign;
    } else {  // subnormal: normalize
      exponent = 1;
      while ((mantissa & 0x400) == 0) {
        mantissa <<= 1;
        --exponent;
      }
      mantissa &= 0x3FF;
      bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
    }
  } else if (exponent == 31) {
    bits = sign | 0x7F800000 | (mantissa << 13);
  } else {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  }
  float out;
  std::memcpy(&out, &bits, 4);
  return out;
#endif
}

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "f32";
    case DType::kF16: return "f16";
    case DType::kBF16: return "bf16";
    case DType::kQ8_0: return "q8_0";
    case DType::kQ4_0: return "q4_0";
    case DType::kQ4_1: return "q4_1";
    case DType::kQ5_0: return "q5_0";
    case DType::kQ5_1: return "q5_1";
    case DType::kQ2_K: return "q2_k";
    case DType::kQ3_K: return "q3_k";
    case DType::kQ4_K: return "q4_k";
    case DType::kQ5_K: return "q5_k";
    case DType::kQ6_K: return "q6_k";
    case DType::kIQ4_NL: return "iq4_nl";
    case DType::kIQ4_XS: return "iq4_xs";
    case DType::kMXFP4: return "mxfp4";
    case DType::kFP8: return "fp8_e4m3";
    case DType::kQ4_Z: return "q4_z";
    case DType::kQ8_Z: return "q8_z";
    case DType::kNVFP4: return "nvfp4";
  }
  return "?";
}

}  // namespace cbatch
