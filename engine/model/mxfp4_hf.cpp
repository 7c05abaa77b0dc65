// Hugging Face MXFP4 pairs (blocks + scales) to ggml MXFP4 blocks, with the shape checks of mxfp4_hf.hpp.
#include "engine/model/mxfp4_hf.hpp"

#include "engine/base/error.hpp"

namespace cbatch {
namespace {

constexpr int64_t kHfBlockBytes = 16;  // 32 E2M1 codes
constexpr int64_t kBlockBytes = 17;    // ggml: the scale, then the codes

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t d = 0; d < shape.size(); ++d) out += (d ? ", " : "") + std::to_string(shape[d]);
  return out + "]";
}

const SafetensorsTensor& u8_entry(const SafetensorsFile& file, const std::string& name) {
  const SafetensorsTensor& t = file.entry(name);
  if (t.dtype != "U8") {
    throw Error("'" + file.path() + "': MXFP4 tensor '" + name + "' has dtype " + t.dtype + ", expected U8");
  }
  return t;
}

}  // namespace

void mxfp4_block_from_hf(const uint8_t* hf_codes, uint8_t scale, uint8_t* out) {
  out[0] = scale;
  for (int i = 0; i < 16; ++i) {  // ggml byte i: element i (HF byte i / 2), element i + 16 (byte 8 + i / 2)
    const int low = (hf_codes[i / 2] >> (4 * (i % 2))) & 0x0F;
    const int high = (hf_codes[8 + i / 2] >> (4 * (i % 2))) & 0x0F;
    out[1 + i] = static_cast<uint8_t>(low | high << 4);
  }
}

OwnedTensor read_hf_mxfp4(const SafetensorsFile& blocks_file, const SafetensorsFile& scales_file,
                          const std::string& name) {
  const std::string blocks_name = name + "_blocks", scales_name = name + "_scales";
  const SafetensorsTensor& blocks = u8_entry(blocks_file, blocks_name);
  const SafetensorsTensor& scales = u8_entry(scales_file, scales_name);
  const std::vector<int64_t>& shape = blocks.shape;
  if (shape.size() < 2 || shape.back() != kHfBlockBytes) {
    throw Error("'" + blocks_file.path() + "': MXFP4 tensor '" + blocks_name + "' has shape " + shape_text(shape) +
                ", expected [..., n / 32, 16] (blocks of 16 bytes, 32 codes)");
  }
  const std::vector<int64_t> scale_shape(shape.begin(), shape.end() - 1);
  if (scales.shape != scale_shape) {
    throw Error("'" + scales_file.path() + "': MXFP4 tensor '" + scales_name + "' has shape " +
                shape_text(scales.shape) + ", expected " + shape_text(scale_shape) + " (one scale per block of '" +
                blocks_name + "')");
  }
  int64_t rows = 1;
  for (size_t d = 0; d + 2 < shape.size(); ++d) rows *= shape[d];
  const int64_t blocks_per_row = shape[shape.size() - 2];
  if (rows == 0 || blocks_per_row == 0) {
    throw Error("'" + blocks_file.path() + "': MXFP4 tensor '" + blocks_name + "' is empty " + shape_text(shape));
  }
  const int64_t num_blocks = rows * blocks_per_row;  // the file holds them: no overflow
  auto bytes = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(num_blocks * kBlockBytes));
  const uint8_t* codes = blocks_file.bytes(blocks);
  const uint8_t* exponents = scales_file.bytes(scales);
  for (int64_t b = 0; b < num_blocks; ++b) {
    mxfp4_block_from_hf(codes + b * kHfBlockBytes, exponents[b], bytes->data() + b * kBlockBytes);
  }
  OwnedTensor out;
  out.view.name = name;
  out.view.dtype = DType::kMXFP4;
  out.view.rows = rows;
  out.view.cols = blocks_per_row * 32;
  out.view.data = bytes->data();
  out.bytes = std::move(bytes);
  return out;
}

}  // namespace cbatch
