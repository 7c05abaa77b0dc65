// The element types of weight tensors (plain and GGUF block types) and the exact conversions of the
// 16-bit floats. Block layouts and their decoding: quant_blocks.hpp; sizes of blocks and rows: tensor.hpp.
#pragma once
#include <cstdint>
#include <cstring>
#include <string_view>

namespace cbatch {

// Plain types, then the GGUF block types as published: the 32-element ones, the K-quants (256), the
// non-linear 4-bit ones and MXFP4 (OCP microscaling FP4; their decoding: quant_blocks.hpp); then cbatch's
// own block types, which no file holds: kFP8 (an FP8 checkpoint's E4M3 codes in blocks of 32 with their
// fp32 scale), Q4_Z and Q8_Z, the unsigned codes of an asymmetric pre-quantized checkpoint with their
// integer zero point (int_codes.hpp), and kNVFP4 (an NVFP4 checkpoint's E2M1 codes, 32 a block, with the
// fp32 scale of each 16). cpu_matmul.cpp sizes a table indexed by DType from the last
// enumerator: a new one goes last and updates kLastDType.
enum class DType : uint8_t {
  kF32, kF16, kBF16, kQ8_0, kQ4_0, kQ4_1,
  kQ5_0, kQ5_1, kQ2_K, kQ3_K, kQ4_K, kQ5_K, kQ6_K, kIQ4_NL, kIQ4_XS, kMXFP4,
  kFP8, kQ4_Z, kQ8_Z, kNVFP4,
};
constexpr DType kLastDType = DType::kNVFP4;

std::string_view dtype_name(DType dtype);

float f16_to_f32(uint16_t h);  // exact

// bf16 (an fp32's upper 16 bits) to fp32, exactly.
inline float bf16_to_f32(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float out;
  std::memcpy(&out, &bits, 4);
  return out;
}

// x rounded to bf16, to nearest even; a NaN stays a (quiet) NaN, infinities stay infinite.
inline uint16_t f32_to_bf16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  return static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

}  // namespace cbatch
