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
// Gemma 4's shared K/V (transformers' kv_sharing_modes, llama.cpp's n_layer_kv_from_start): the last
// num_kv_shared layers read the last earlier non-shared layer of their own window; layer l -> its source
// (itself when not shared); empty when none are shared. Throws, prefixing `key` (the file and key), when
// num_kv_shared is not below num_layers or a shared layer has no such source.
std::vector<int> shared_kv_sources(const std::vector<int>& windows, int num_layers, int64_t num_kv_shared,
                                   const std::string& key);
// "attention", "gated DeltaNet", for messages and inspect.
std::string_view layer_kind_name(LayerKind kind);

}  // namespace cbatch
