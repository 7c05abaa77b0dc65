// A Hugging Face checkpoint's quantization_config (config.json) as one small struct: which scheme stores its
// linear weights (GPTQ, AWQ, FP8, compressed-tensors, gpt-oss's MXFP4), with what bits and groups, and
// which modules it left in float. Reading refuses a scheme or a bit width cbatch does not read, listing the
// ones it does. The stored tensors themselves are read by hf_quantized.hpp.
#pragma once
#include <string>
#include <vector>

namespace cbatch {

struct QuantizationConfig {
  std::string method;              // "" (none), "gptq", "awq", "fp8", "compressed-tensors", "mxfp4"
  int bits = 0;                    // bits per stored weight code (4, 8)
  int group_size = 0;              // weights per scale along the input; -1: one group for the whole input
  bool sym = true;                 // GPTQ: symmetric (the zero points are then constant)
  bool desc_act = false;           // GPTQ: act-order, the input rows' groups come from g_idx
  // GPTQ checkpoint_format ("gptq": v1, zeros stored minus 1; "gptq_v2": as they are), AWQ version
  // ("gemm"), compressed-tensors format ("float-quantized", "pack-quantized", "nvfp4-pack-quantized")
  std::string format;
  std::string strategy;            // compressed-tensors weights: "tensor", "channel", "group", "block", "tensor_group"
  std::string type;                // compressed-tensors weights: "int" or "float"
  std::vector<int> weight_block_size;  // FP8 blocks (output rows, input cols); empty: per tensor / channel
  std::vector<std::string> not_converted;  // modules_to_not_convert / ignore, as written

  bool is_quantized() const { return !method.empty(); }
};

// The quantization_config of config.json at `config_path` (method "" when it has none). Throws
// cbatch::Error naming the field for a scheme, format or bit width cbatch does not read.
QuantizationConfig read_quantization_config(const std::string& config_path);

// One line for `cbatch inspect`: the scheme, its bits and groups, and about how many bits a weight takes
// with its scales and zeros ("none" when not quantized).
std::string describe_quantization(const QuantizationConfig& q);

// Whether q's weights are FP8 (quant_method fp8, or compressed-tensors float-quantized).
bool is_fp8(const QuantizationConfig& q);

}  // namespace cbatch
