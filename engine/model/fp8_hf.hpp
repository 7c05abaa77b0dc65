// FP8 Linear weights as Hugging Face checkpoints store them: the weight itself F8_E4M3 (out, in) (fp8.hpp),
// and its scales, by which the codes are multiplied: `weight_scale_inv` (ceil(out / B0), ceil(in / B1)) per
// block of weight_block_size [B0, B1] (quant_method fp8, DeepSeek's layout; despite the name it multiplies),
// or one `weight_scale_inv` / `weight_scale` for the tensor, or `weight_scale` (out, 1) per output channel
// (compressed-tensors float-quantized). Activation scales (`input_scale`) are for FP8 activations and are
// not read: the weights are used on their own. Kept as kFP8 blocks (dtype.hpp: the codes as stored, each
// 32 inputs with their scale, 9 bits a weight, decoding to exactly code * scale) where the scale blocks
// are whole 32-input blocks, else expanded to f32. A NaN code is refused, naming the tensor.
#pragma once
#include <cstdint>
#include <string>

#include "engine/model/hf_quantization.hpp"
#include "engine/model/quantized_parts.hpp"

namespace cbatch {

// w (out, in) = code * scale of its block; blocks of (block_rows, block_cols), row-major scales
// (ceil(out / block_rows), ceil(in / block_cols)). A tensor scale is one block of (out, in), a channel's (1, in).
void fp8_dequantize(int64_t out, int64_t in, int64_t block_rows, int64_t block_cols, const uint8_t* codes,
                    const float* scales, float* w);

// The codes (out, in) with their scales as kFP8 blocks; in and block_cols are multiples of 32.
OwnedTensor fp8_blocks(const std::string& name, int64_t out, int64_t in, int64_t block_rows, int64_t block_cols,
                       const uint8_t* codes, const float* scales);

OwnedTensor read_fp8(const TensorFileOf& file_of, const std::string& weight_name, const QuantizationConfig& q);

}  // namespace cbatch
