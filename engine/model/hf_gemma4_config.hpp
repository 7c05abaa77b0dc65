// Gemma 4's own config.json fields (the text model's, text_config of a multimodal checkpoint): the global
// layers' head size, K/V heads and proportional RoPE, attention_k_eq_v, num_kv_shared_layers and the layers
// each shared one reads, use_double_wide_mlp, the per-layer inputs. Read after the family's common fields.
#pragma once
#include <string>
#include <vector>

#include "engine/base/json_file.hpp"
#include "engine/model/model_config.hpp"

namespace cbatch {

// Fills the gemma4_layers fields of c (its layer windows already read); `notes` gets what is skipped.
void read_gemma4_fields(const JsonFields& f, ModelConfig& c, std::vector<std::string>& notes);

}  // namespace cbatch
