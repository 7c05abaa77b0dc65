// A pre-quantized integer Linear (GPTQ, AWQ, compressed-tensors pack-quantized) as its values say it:
// w[o][k] = scale[o][group[k]] * code[o][k], the code already less its zero point, and how such a weight is
// kept: as the block type that holds it exactly (int_codes_tensor: a GGUF type, or cbatch's Q4_Z and Q8_Z
// for codes with a zero point), so every backend reads it as it reads a GGUF of those weights (the CPU's
// int8 panels under --cpu-precision fast), or expanded to f32.
// A block of 32 inputs takes one scale: the group of its first input must be the group of all 32. With
// act-order (group[k] not k / group_rows) the inputs are first sorted by group (stable), and the tensor
// says so in its input_order (tensor.hpp): column j of the blocks holds input input_order[j].
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/model/dtype.hpp"
#include "engine/model/mxfp4_hf.hpp"

namespace cbatch {

struct IntCodes {
  int64_t out = 0, in = 0, num_groups = 1;
  std::vector<int16_t> codes;   // (out, in): the stored code less its zero point
  std::vector<float> scales;    // (out, num_groups)
  std::vector<int16_t> zeros;   // (out, num_groups): the zero points (codes + zeros: the stored codes), or empty
  std::vector<int32_t> groups;  // (in): the group of each input, every group group_rows inputs

  int64_t group_rows() const { return in / num_groups; }
};

// w (out, in) in f32: scale * code, the published loaders' product.
std::vector<float> int_codes_dequantize(const IntCodes& c);

// The smallest block type that holds every value of c exactly: Q4_0 (codes in [-8, 7]); Q4_Z (with zero
// points: the stored codes in [0, 15], zero points in [0, 255], an asymmetric 4-bit checkpoint); Q5_0
// (codes in [-16, 15]); Q8_0 ([-128, 127]); Q8_Z (stored codes and zero points in [0, 255], an asymmetric
// 8-bit one); or F32 when none does: a group of inputs that is not whole 32-blocks, or a scale that is
// not an fp16 number.
DType int_codes_block_type(const IntCodes& c);

// c as a tensor named `name`: in int_codes_block_type's blocks (with an input_order under act-order), or
// as f32 (out, in) when that is F32.
OwnedTensor int_codes_tensor(const std::string& name, const IntCodes& c);

}  // namespace cbatch
