// FP8 expansion (fp8_hf.hpp): the scale tensor's shape says tensor, channel or block, and must agree with
// the config's weight_block_size.
#include "engine/model/fp8_hf.hpp"

#include "engine/model/fp8.hpp"

namespace cbatch {

void fp8_dequantize(int64_t out, int64_t in, int64_t block_rows, int64_t block_cols, const uint8_t* codes,
                    const float* scales, float* w) {
  const int64_t scale_cols = (in + block_cols - 1) / block_cols;
  for (int64_t o = 0; o < out; ++o) {
    const float* row_scales = scales + (o / block_rows) * scale_cols;
    for (int64_t k = 0; k < in; ++k) w[o * in + k] = fp8_e4m3_to_float(codes[o * in + k]) * row_scales[k / block_cols];
  }
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
  std::vector<float> w(static_cast<size_t>(out * in));
  fp8_dequantize(out, in, block_rows, block_cols, parts.bytes("weight"), scale_values.data(), w.data());
  return owned_f32(parts.name("weight"), out, in, std::move(w));
}

}  // namespace cbatch
