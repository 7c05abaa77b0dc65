// MXFP4 weights as Hugging Face checkpoints ship them (gpt-oss): two U8 safetensors per weight,
// `<name>_blocks` (..., rows, n / 32, 16: byte i of a block holds element 2i in its low nibble and 2i + 1
// in its high one, E2M1 codes) and `<name>_scales` (..., rows, n / 32: E8M0 exponents, scale 2^(e - 127)).
// They become one MXFP4 tensor (rows, n), leading dims folded into rows, in ggml's block layout
// (quant_blocks.hpp: the scale byte, then 16 bytes whose low nibbles are elements 0..15 and high nibbles
// 16..31). The nibble order differs and the scales lie apart, so this is a conversion at load into a buffer
// the tensor owns (17 bytes per 32 weights), not a view of the mapping; the values are unchanged.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/model/safetensors.hpp"
#include "engine/model/tensor.hpp"

namespace cbatch {

// A tensor whose bytes it owns: view.data points into *bytes.
struct OwnedTensor {
  TensorView view;
  std::shared_ptr<const std::vector<uint8_t>> bytes;
};

// One ggml MXFP4 block (17 bytes) from an HF block's 16 code bytes and its scale byte.
void mxfp4_block_from_hf(const uint8_t* hf_codes, uint8_t scale, uint8_t* out);

// The MXFP4 tensor `name` from `<name>_blocks` in blocks_file and `<name>_scales` in scales_file (the
// same file, or two shards). Throws, naming the tensor, when either is not U8, the blocks are not of 16
// bytes, or the scales' shape is not the blocks' without their last dim.
OwnedTensor read_hf_mxfp4(const SafetensorsFile& blocks_file, const SafetensorsFile& scales_file,
                          const std::string& name);

}  // namespace cbatch
