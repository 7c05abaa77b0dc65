// compressed-tensors "nvfp4-pack-quantized" Linear weights (NVIDIA's FP4: llm-compressor's NVFP4 and
// W4A16-FP4 schemes), expanded to f32 (out, in) at load: `weight_packed` U8 (out, in / 2), two E2M1 codes a
// byte, input 2i in the low nibble and 2i + 1 in the high one (sign bit 8, magnitudes 0, 0.5, 1, 1.5, 2, 3,
// 4, 6); `weight_scale` F8_E4M3 (out, in / 16), one per 16 inputs; `weight_global_scale` F32 (one value).
// The global scale is stored as the divisor (compressed-tensors makes it 448 * 6 / amax of the tensor, and
// its dequantization divides by it; vLLM's NVFP4 layers take its reciprocal as the multiplier), so
//     w[o][k] = e2m1(code[o][k]) * (fp8(weight_scale[o][k / 16]) / weight_global_scale)
// in fp32, the quotient rounded once per 16-block, then the product. input_global_scale (activations) is
// not read: the weights are used on their own. Kept as kNVFP4 blocks (dtype.hpp: each 32 inputs' codes with
// half of each 16's scale, 6 bits a weight, decoding to exactly that product; the CPU's 8-bit path takes
// them as MXFP4's table nibbles with a scale per 16) where the inputs are whole 32-blocks, else (or where a
// halved scale would be subnormal) expanded to f32.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "engine/model/hf_quantization.hpp"
#include "engine/model/quantized_parts.hpp"

namespace cbatch {

// The value of an E2M1 code (its low 4 bits).
float e2m1_value(uint8_t code);

// w (out, in) from weight_packed's bytes (out, in / 2), the scales' E4M3 bytes (out, in / 16) and the
// global scale.
void nvfp4_dequantize(int64_t out, int64_t in, const uint8_t* packed, const uint8_t* scales, float global_scale,
                      float* w);

// The tensor as kNVFP4 blocks (in a multiple of 32), or nullopt where a halved scale is not exact.
std::optional<OwnedTensor> nvfp4_blocks(const std::string& name, int64_t out, int64_t in, const uint8_t* packed,
                                        const uint8_t* scales, float global_scale);

OwnedTensor read_nvfp4(const TensorFileOf& file_of, const std::string& weight_name);

}  // namespace cbatch
