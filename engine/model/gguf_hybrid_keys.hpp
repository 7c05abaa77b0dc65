// The GGUF keys of the hybrid families (qwen35) as llama.cpp's converter writes them: layer kinds, the gated
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

}  // namespace cbatch
