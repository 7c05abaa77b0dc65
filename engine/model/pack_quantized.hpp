// compressed-tensors "pack-quantized" Linear weights (INT4 / INT8, llm-compressor's W4A16 / W8A16), expanded
// to f32 (out, in): `weight_packed` I32 (out, ceil(in * bits / 32)), input k of row o in word k / (32 / bits)
// at bits (k % (32 / bits)) * bits, stored as the signed code plus 2^(bits - 1); `weight_scale` (out, groups)
// (groups = in / group_size for the group strategy, 1 for channel); `weight_zero_point` I32 (ceil(out * bits
// / 32), groups), packed along the output the same way and offset alike, only when asymmetric (symmetric:
// zero 0); `weight_g_idx` I32 (in) with act-order (else input k is in group k / group_size); `weight_shape`
// [out, in]. w[o][k] = scale[o][g] * (code - zero[o][g]), g the group of input k.
#pragma once
#include <cstdint>
#include <string>

#include "engine/model/hf_quantization.hpp"
#include "engine/model/int_codes.hpp"
#include "engine/model/quantized_parts.hpp"

namespace cbatch {

struct PackedIntShape {
  int bits = 4;
  int64_t in = 0;
  int64_t out = 0;
  int64_t num_groups = 1;
};

// The codes less their zeros, scales and groups from weight_packed's words, weight_zero_point's words
// (nullptr: symmetric), the scales (out, num_groups) as fp32 and each input row's group.
IntCodes packed_int_codes(const PackedIntShape& s, const uint32_t* packed, const uint32_t* zero_words,
                          const float* scales, const int32_t* groups);
// w (out, in) from the same: scale * (code - zero).
void packed_int_dequantize(const PackedIntShape& s, const uint32_t* packed, const uint32_t* zero_words,
                           const float* scales, const int32_t* groups, float* w);

OwnedTensor read_pack_quantized(const TensorFileOf& file_of, const std::string& weight_name,
                                const QuantizationConfig& q);

}  // namespace cbatch
