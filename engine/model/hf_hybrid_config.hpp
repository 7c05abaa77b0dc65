// The config.json fields of the hybrid families beyond the Llama ones (Qwen3.5): the layer kinds
// (layer_types, or full_attention_interval), the gated DeltaNet sizes (linear_*), and the partial rotary
// factor every family may name (rope_parameters.partial_rotary_factor, or the top-level one), which only a
// family with partial rotary accepts. Errors name the field and the value.
#pragma once
#include <string>
#include <vector>

#include "engine/base/json_file.hpp"
#include "engine/model/family.hpp"

namespace cbatch {

// rotary_dim from the partial rotary factor (0 when the rotation is full).
void read_rotary_dim(const JsonFields& f, const Family& family, ModelConfig& c);
// layer_kinds and the recurrent layers' sizes of a hybrid family (hf_ssm_config.hpp: short conv, Mamba-2); `notes` gets what is left out on
// purpose (the multi-token-prediction layers).
void read_hybrid_fields(const JsonFields& f, const Family& family, ModelConfig& c, std::vector<std::string>& notes);

}  // namespace cbatch
