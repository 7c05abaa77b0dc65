// Which kind each layer of a hybrid model is (ModelConfig::layer_kinds), from the spellings the files use:
// config.json's layer_types ("linear_attention", "full_attention") or full_attention_interval, and GGUF's
// attention.recurrent_layers (a bool per block) or full_attention_interval. Pure functions of those values,
// so that both loaders agree and the unit tests can drive them; a loader names the key in its errors.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/model/model_config.hpp"

namespace cbatch {

// The kind of a config.json layer_types value; nullopt for a type cbatch does not run.
std::optional<LayerKind> layer_kind_of_type(std::string_view type);
// "linear_attention, full_attention": the layer_types values cbatch runs, for messages.
std::string supported_layer_types();
// Every interval-th layer attention (layers interval - 1, 2 * interval - 1, ...), the others DeltaNet, as
// Qwen3.5's and Qwen3-Next's configs and llama.cpp read full_attention_interval. interval >= 1.
std::vector<LayerKind> layer_kinds_from_interval(int num_layers, int interval);
// GGUF attention.recurrent_layers: a flag per block (nonzero: recurrent); blocks past num_layers (the
// multi-token-prediction blocks) are not generation layers and are left out. Empty when the list is
// shorter than num_layers.
std::vector<LayerKind> layer_kinds_from_recurrent_flags(const std::vector<int64_t>& recurrent, int num_layers);
// "attention", "gated DeltaNet", for messages and inspect.
std::string_view layer_kind_name(LayerKind kind);

}  // namespace cbatch
