// Which float weights of a Hugging Face checkpoint are stored quantized under its quantization_config, and
// their reading at load (gptq.hpp, awq.hpp, pack_quantized.hpp: kept as the GGUF blocks that hold their
// codes, int_codes.hpp; fp8_hf.hpp, nvfp4_hf.hpp: expanded to f32): a Linear's `.weight` is stored as
// `.qweight` + `.qzeros` + `.scales` (+ `.g_idx`) under GPTQ and AWQ, as `.weight_packed` and its scales under
// compressed-tensors, as an F8_E4M3 `.weight` with its scales under FP8. Modules the checkpoint kept in
// float (modules_to_not_convert / ignore, the embedding, the norms) are plain tensors and are read as such.
#pragma once
#include <string>

#include "engine/model/hf_quantization.hpp"
#include "engine/model/hf_stacked_experts.hpp"
#include "engine/model/mxfp4_hf.hpp"

namespace cbatch {

// Whether q's weights are integer codes kept as GGUF blocks where one holds them (int_codes.hpp): GPTQ,
// AWQ, compressed-tensors pack-quantized.
bool keeps_int_codes(const QuantizationConfig& q);

// Whether the float weight `name` is stored quantized in the files under q.
bool is_stored_quantized(const TensorFileOf& file_of, const QuantizationConfig& q, const std::string& name);

// The tensor (blocks or f32) of a weight is_stored_quantized says is quantized; throws cbatch::Error naming the
// tensor when a part is missing or of the wrong dtype or shape.
OwnedTensor read_quantized(const TensorFileOf& file_of, const QuantizationConfig& q, const std::string& name);

}  // namespace cbatch
