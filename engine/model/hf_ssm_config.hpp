// The config.json fields of the hybrid families whose recurrent layers are short convolutions (LFM2) or
// Mamba-2 (Granite 4.0-H, Nemotron-H), read after the Llama sizes and the layer kinds: their sizes, the
// FFN widths and norms' epsilon they name their own way, Granite's multipliers, experts and NoPE attention,
// Nemotron-H's one sublayer per layer. Errors name the field and the value.
#pragma once
#include "engine/base/json_file.hpp"
#include "engine/model/family.hpp"

namespace cbatch {

void read_ssm_fields(const JsonFields& f, const Family& family, ModelConfig& c);

}  // namespace cbatch
