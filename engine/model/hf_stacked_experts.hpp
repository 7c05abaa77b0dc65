// A sparse layer whose experts are stacked in 3-D tensors, gpt-oss's Hugging Face layout, under the layer's
// `<prefix>` ("model.layers.N."), names from the expert table's hf_stacked column (layer_tensors.hpp): rows
// that share a tensor are interleaved in it. mlp.experts.gate_up_proj (E, dim, 2 * width) and down_proj (E, width,
// dim), products x @ W (so (in, out)), with gate and up interleaved along 2 * width (gate = 0, 2, 4, ...,
// up = 1, 3, 5, ...); gate_up_proj_bias (E, 2 * width), interleaved likewise; down_proj_bias (E, dim).
// As shipped, the two matrices are MXFP4 pairs instead (mxfp4_hf.hpp): gate_up_proj_blocks/_scales
// (E, 2 * width, dim / 32, 16) and down_proj_blocks/_scales (E, dim, width / 32, 16), already (out, in),
// rows interleaved. Each becomes per-expert views in our layout ((out, in), gate rows then up rows) into
// buffers owned here: F32/BF16/F16 transposed element by element, MXFP4 rows moved whole; values and
// dtype unchanged. transformers 5's fused experts (Qwen3.5-MoE: StackedLayout::kOutIn) are gate_up_proj
// (E, 2 * width, dim), gate rows then up rows, and down_proj (E, dim, width), already (out, in): views of
// the mapped file, no copy.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/model/model.hpp"
#include "engine/model/safetensors.hpp"

namespace cbatch {

struct StackedExperts {
  std::vector<ExpertTensors> experts;                              // (num_experts), biases included
  std::vector<std::shared_ptr<const std::vector<uint8_t>>> buffers;  // the bytes the views point into
};

// The file that holds a tensor, or nullptr when none does.
using TensorFileOf = std::function<const SafetensorsFile*(const std::string& name)>;

// `module`: what the stacked names are under in the layer ("mlp."; Gemma 4's "": layers.N.experts.*).
bool has_stacked_experts(const TensorFileOf& file_of, const std::string& prefix, std::string_view module = "mlp.");

// gpt-oss's (E, in, out) with gate and up interleaved, or transformers 5's (E, out, in), gate rows then up.
enum class StackedLayout : uint8_t { kInOutInterleaved, kOutIn };

// The num_experts experts of the expert rows the config has. Throws cbatch::Error naming the tensor when one
// is missing or its shape is not the config's.
StackedExperts read_stacked_experts(const TensorFileOf& file_of, const std::string& prefix, const ModelConfig& config,
                                    StackedLayout layout = StackedLayout::kInOutInterleaved,
                                    std::string_view module = "mlp.");

}  // namespace cbatch
