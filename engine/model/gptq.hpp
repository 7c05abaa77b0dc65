// GPTQ Linear weights as AutoGPTQ / GPTQModel / transformers checkpoints store them, expanded to f32 (out, in):
// `qweight` I32 (in * bits / 32, out): input row k's code in word k / (32 / bits) at bits (k % (32 / bits))
// * bits; `qzeros` I32 (groups, out * bits / 32), packed the same way along the output; `scales` (groups, out)
// F16; `g_idx` I32 (in), the group of each input row (k / group_size without act-order, a permutation's
// groups with it). w[o][k] = scale[g][o] * (code - zero), g = g_idx[k]; checkpoint_format "gptq" (v1) stores
// each zero minus 1, so the zero used is the stored one plus 1, as in the published loaders; "gptq_v2"
// stores it as it is.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/model/hf_quantization.hpp"
#include "engine/model/int_codes.hpp"
#include "engine/model/quantized_parts.hpp"

namespace cbatch {

struct GptqShape {
  int bits = 4;
  int64_t in = 0;          // input width (the float weight's columns)
  int64_t out = 0;         // output width (its rows)
  int64_t num_groups = 1;
  int zero_offset = 1;     // added to each stored zero: 1 for v1 checkpoints, 0 for gptq_v2
};

// The codes less their zeros, the scales (out, groups) and the groups from the unpacked words (qweight,
// qzeros), the scales (groups, out) as fp32 and each input row's group.
IntCodes gptq_codes(const GptqShape& s, const uint32_t* qweight, const uint32_t* qzeros, const float* scales,
                    const int32_t* g_idx);
// w (out, in) from the same: scale * (code - zero).
void gptq_dequantize(const GptqShape& s, const uint32_t* qweight, const uint32_t* qzeros, const float* scales,
                     const int32_t* g_idx, float* w);

// The GPTQ Linear replacing float weight `weight_name`, checked against q (group size, bits, g_idx), kept
// as int_codes_tensor keeps it.
OwnedTensor read_gptq(const TensorFileOf& file_of, const std::string& weight_name, const QuantizationConfig& q);

}  // namespace cbatch
