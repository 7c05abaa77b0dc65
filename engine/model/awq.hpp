// AWQ Linear weights in AutoAWQ's GEMM layout, expanded to f32 (out, in): `qweight` I32 (in, out / 8), each
// word eight 4-bit codes of output columns 8c + {0, 2, 4, 6, 1, 3, 5, 7} from its low nibble up (the order
// of the GEMM kernel's unpacking); `qzeros` I32 (groups, out / 8) packed the same way; `scales` (groups, out)
// F16. Input row k is in group k / group_size; w[o][k] = scale[g][o] * (code - zero), zeros as stored.
#pragma once
#include <cstdint>
#include <string>

#include "engine/model/hf_quantization.hpp"
#include "engine/model/int_codes.hpp"
#include "engine/model/quantized_parts.hpp"

namespace cbatch {

// The output column (within its word's eight) of each nibble of a word, low nibble first.
inline constexpr int kAwqNibbleColumn[8] = {0, 2, 4, 6, 1, 3, 5, 7};

// The codes less their zeros, scales (out, groups) and groups from the words of qweight (in, out / 8) and
// qzeros (in / group_size, out / 8) and the fp32 scales (groups, out).
IntCodes awq_codes(int64_t in, int64_t out, int64_t group_size, const uint32_t* qweight, const uint32_t* qzeros,
                   const float* scales);
// w (out, in) from the same: scale * (code - zero).
void awq_dequantize(int64_t in, int64_t out, int64_t group_size, const uint32_t* qweight, const uint32_t* qzeros,
                    const float* scales, float* w);

OwnedTensor read_awq(const TensorFileOf& file_of, const std::string& weight_name, const QuantizationConfig& q);

}  // namespace cbatch
