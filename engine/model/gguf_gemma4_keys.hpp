// Gemma 4's GGUF keys and its rope_freqs tensor (gguf_gemma4_keys.cpp), as llama.cpp's converter writes them.
#pragma once
#include <string>
#include <vector>

#include "engine/model/gguf.hpp"
#include "engine/model/model_config.hpp"

namespace cbatch {

// Sets, from the `{arch}.` keys p, the sizes other families read from scalar keys (hidden_dim, num_kv_heads,
// head_dim: some are per-layer arrays here) and every gemma4_layers field, the windows and the local RoPE
// base. Call once dim, num_layers and num_heads are read; the family's other keys are read after.
void read_gemma4_keys(const GgufFile& gguf, const std::string& p, ModelConfig& c);

}  // namespace cbatch
