// NVFP4 Linears (nvfp4_hf.hpp): weight_packed's shape gives the sizes, the scales' and the global scale's
// follow; a global scale that is not a positive finite number is refused, naming the tensor. Kept as kNVFP4
// blocks where the inputs are whole 32-blocks, else expanded to f32.
#include "engine/model/nvfp4_hf.hpp"

#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

#include "engine/model/fp8.hpp"
#include "engine/model/quant_blocks.hpp"

namespace cbatch {

constexpr int64_t kNvfp4Group = 16;  // inputs per weight_scale

float e2m1_value(uint8_t code) {
  static constexpr float kMagnitude[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  const float m = kMagnitude[code & 7];
  return (code & 8) ? -m : m;
}

void nvfp4_dequantize(int64_t out, int64_t in, const uint8_t* packed, const uint8_t* scales, float global_scale,
                      float* w) {
  for (int64_t o = 0; o < out; ++o) {
    for (int64_t k = 0; k < in; ++k) {
      const float scale = fp8_e4m3_to_float(scales[o * (in / kNvfp4Group) + k / kNvfp4Group]) / global_scale;
      const uint8_t pair = packed[o * (in / 2) + k / 2];
      w[o * in + k] = e2m1_value(k % 2 == 0 ? pair & 0x0F : pair >> 4) * scale;
    }
  }
}

std::optional<OwnedTensor> nvfp4_blocks(const std::string& name, int64_t out, int64_t in, const uint8_t* packed,
                                        const uint8_t* scales, float global_scale) {
  constexpr int64_t kBytes = BlockFormat<DType::kNVFP4>::kBytes;
  auto bytes = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(out * (in / 32) * kBytes));
  uint8_t* block = bytes->data();
  for (int64_t o = 0; o < out; ++o) {
    const uint8_t* row = packed + o * (in / 2);
    for (int64_t k = 0; k < in; k += 32, block += kBytes) {
      for (int j = 0; j < 2; ++j) {
        const float s = fp8_e4m3_to_float(scales[o * (in / kNvfp4Group) + k / kNvfp4Group + j]) / global_scale;
        const float half = s * 0.5f;
        if (half * 2.0f != s) return std::nullopt;  // a subnormal half: not exact
        std::memcpy(block + 4 * j, &half, 4);  // little-endian, as the decoder reads it
      }
      for (int e = 0; e < 16; ++e) {  // nibble32: byte e holds element e (low) and e + 16 (high)
        const int64_t lo = k + e, hi = k + e + 16;
        const uint8_t lo_code = lo % 2 == 0 ? row[lo / 2] & 0x0F : row[lo / 2] >> 4;
        const uint8_t hi_code = hi % 2 == 0 ? row[hi / 2] & 0x0F : row[hi / 2] >> 4;
        block[8 + e] = static_cast<uint8_t>(lo_code | hi_code << 4);
      }
    }
  }
  return owned_tensor(name, DType::kNVFP4, out, in, std::move(bytes));
}

OwnedTensor read_nvfp4(const TensorFileOf& file_of, const std::string& weight_name) {
  const QuantizedParts parts(file_of, weight_name, "NVFP4");
  const SafetensorsTensor& packed = parts.entry("weight_packed", "U8");
  if (packed.shape.size() != 2 || packed.shape[0] == 0 || packed.shape[1] == 0 ||
      (packed.shape[1] * 2) % kNvfp4Group != 0) {
    parts.fail("weight_packed", "has shape " + shape_list(packed.shape) +
                                    ", expected [out, in / 2] with in a multiple of 16");
  }
  const int64_t out = packed.shape[0], in = packed.shape[1] * 2;
  parts.entry("weight_scale", "F8_E4M3");
  parts.expect_shape("weight_scale", {out, in / kNvfp4Group}, "out, in / 16");
  parts.entry("weight_global_scale", "");
  const std::vector<float> global = parts.floats("weight_global_scale");
  if (global.size() != 1) {
    parts.fail("weight_global_scale", "has " + std::to_string(global.size()) + " values, expected one");
  }
  if (!(global[0] > 0.0f) || !std::isfinite(global[0])) {
    parts.fail("weight_global_scale", "is " + std::to_string(global[0]) + ", not a positive finite number");
  }
  if (in % 32 == 0) {
    std::optional<OwnedTensor> blocks = nvfp4_blocks(parts.name("weight_packed"), out, in,
                                                     parts.bytes("weight_packed"), parts.bytes("weight_scale"), global[0]);
    if (blocks) return std::move(*blocks);
  }
  std::vector<float> w(static_cast<size_t>(out * in));
  nvfp4_dequantize(out, in, parts.bytes("weight_packed"), parts.bytes("weight_scale"), global[0], w.data());
  return owned_f32(parts.name("weight_packed"), out, in, std::move(w));
}

}  // namespace cbatch
