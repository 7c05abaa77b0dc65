// FP8 Linears (fp8_hf.hpp): the scale tensor's shape says tensor, channel or block, and must agree with
// the config's weight_block_size; the codes go into kFP8 blocks of 32 inputs, each with its scale, where
// the scale blocks are whole 32-input blocks, else they are expanded to f32.
#include "engine/model/fp8_hf.hpp"

#include <cstring>
#include <memory>
#include <vector>

#include "engine/model/fp8.hpp"
#include "engine/model/quant_blocks.hpp"

namespace cbatch {

constexpr int64_t kFp8Block = 32;  // inputs per kFP8 block

void fp8_dequantize(int64_t out, int64_t in, int64_t block_rows, int64_t block_cols, const uint8_t* codes,
                    const float* scales, float* w) {
  const int64_t scale_cols = (in + block_cols - 1) / block_cols;
  for (int64_t o = 0; o < out; ++o) {
    const float* row_scales = scales + (o / block_rows) * scale_cols;
    for (int64_t k = 0; k < in; ++k) w[o * in + k] = fp8_e4m3_to_float(codes[o * in + k]) * row_scales[k / block_cols];
  }
}

OwnedTensor fp8_blocks(const std::string& name, int64_t out, int64_t in, int64_t block_rows, int64_t block_cols,
                       const uint8_t* codes, const float* scales) {
  constexpr int64_t kBytes = BlockFormat<DType::kFP8>::kBytes;
  const int64_t scale_cols = (in + block_cols - 1) / block_cols;
  auto bytes = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(out * (in / kFp8Block) * kBytes));
  uint8_t* block = bytes->data();
  for (int64_t o = 0; o < out; ++o) {
    const float* row_scales = scales + (o / block_rows) * scale_cols;
    for (int64_t k = 0; k < in; k += kFp8Block, block += kBytes) {
      std::memcpy(block, &row_scales[k / block_cols], 4);  // little-endian, as the decoder reads it
      std::memcpy(block + 4, codes + o * in + k, kFp8Block);
    }
  }
  return owned_tensor(name, DType::kFP8, out, in, std::move(bytes));
}

OwnedTensor read_fp8(const TensorFileOf& file_of, const std::string& weight_name, const QuantizationConfig& q) {
  const QuantizedParts parts(file_of, weight_name, "FP8");
  const SafetensorsTensor& weight = parts.entry("weight", "F8_E4M3");
  if (weight.shape.size() != 2 || weight.shape[0] == 0 || weight.shape[1] == 0) {
    parts.fail("weight", "has shape " + shape_list(weight.shape) + ", expected [out, in]");
  }
  const int64_t out = weight.shape[0], in = weight.shape[1];
  const std::string scale = parts.has("weight_scale_inv") ? "weight_scale_inv" : "weight_scale";
  const SafetensorsTensor& scales = parts.entry(scale, "");
  int64_t numel = 1;
  for (int64_t d : scales.shape) numel *= d;
  int64_t block_rows = out, block_cols = in;  // one scale for the tensor
  if (q.weight_block_size.size() == 2) {
    block_rows = q.weight_block_size[0];
    block_cols = q.weight_block_size[1];
    parts.expect_shape(scale, {(out + block_rows - 1) / block_rows, (in + block_cols - 1) / block_cols},
                       "one scale per block of " + std::to_string(block_rows) + "x" + std::to_string(block_cols));
  } else if (numel == out && out > 1) {
    block_rows = 1;  // per output channel
  } else if (numel != 1) {
    parts.fail(scale, "has shape " + shape_list(scales.shape) + ", expected one scale for the tensor or [" +
                          std::to_string(out) + ", 1] (one per output channel)");
  }
  const std::vector<float> scale_values = parts.floats(scale);
  const uint8_t* codes = parts.bytes("weight");
  for (int64_t i = 0; i < out * in; ++i) {
    if ((codes[i] & 0x7F) == 0x7F) {
      parts.fail("weight", "holds a NaN code (0x" + std::string(codes[i] == 0xFF ? "FF" : "7F") + ") at row " +
                               std::to_string(i / in) + ", column " + std::to_string(i % in));
    }
  }
  if (in % kFp8Block == 0 && block_cols % kFp8Block == 0) {
    return fp8_blocks(parts.name("weight"), out, in, block_rows, block_cols, codes, scale_values.data());
  }
  std::vector<float> w(static_cast<size_t>(out * in));
  fp8_dequantize(out, in, block_rows, block_cols, codes, scale_values.data(), w.data());
  return owned_f32(parts.name("weight"), out, in, std::move(w));
}

}  // namespace cbatch
