// The GGUF keys of the hybrid families (qwen35, qwen3next; lfm2, granitehybrid, nemotron_h) as llama.cpp's converter writes them: layer kinds, the gated
// DeltaNet sizes, partial rotary, and the multi-token-prediction blocks, which are counted in block_count but
// are not generation layers. Errors name the file and the key.
#pragma once
#include <string>
#include <vector>

#include "engine/model/family.hpp"
#include "engine/model/gguf.hpp"

namespace cbatch {

// Sets c.num_layers (block_count less nextn_predict_layers), c.rotary_dim, c.layer_kinds and c.deltanet of a
// family with DeltaNet layers or partial rotary; notes gets what is skipped. Call after the sizes are read.
void read_hybrid_keys(const GgufFile& gguf, const Family& family, const std::string& p, ModelConfig& c,
                      std::vector<std::string>& notes);

// The short-conv and Mamba-2 families' keys (gguf_ssm_keys.cpp): c.layer_kinds, c.short_conv_kernel or
// c.mamba, Granite's multipliers and NoPE attention, Nemotron-H's norm epsilon. Call after the family keys.
void read_ssm_keys(const GgufFile& gguf, const Family& family, const std::string& p, ModelConfig& c);

}  // namespace cbatch
