// Which kind each layer of a hybrid model is (ModelConfig::layer_kinds), from the spellings the files use:
// config.json's layer_types ("linear_attention", "full_attention", LFM2's "conv", Granite's "mamba" and
// "attention"), full_attention_interval, Nemotron-H's hybrid_override_pattern ("M*-"), and GGUF's
// attention.recurrent_layers (a bool per block) or per-layer head_count_kv (0: recurrent) and
// feed_forward_length (Nemotron-H: its MLP layers). Pure functions of those values, so that both loaders
// agree and the unit tests can drive them; a loader names the key in its errors.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/model/model_config.hpp"

namespace cbatch {

// The kind of a config.json layer_types value in a family whose recurrent layers are of kind `recurrent`
// ("linear_attention" names them in transformers 5's configs); nullopt for a type the family does not run.
std::optional<LayerKind> layer_kind_of_type(std::string_view type, LayerKind recurrent);
// "linear_attention, full_attention": the layer_types values a family of that recurrent kind runs, for messages.
std::string supported_layer_types(LayerKind recurrent);
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
// Nemotron-H's hybrid_override_pattern: 'M' Mamba-2, '*' attention, '-' an MLP alone. nullopt with
// *bad_at the position of the first other character.
std::optional<std::vector<LayerKind>> layer_kinds_from_pattern(std::string_view pattern, size_t* bad_at);
// llama.cpp's per-layer GGUF arrays: a layer with KV heads is attention; else, with a nonzero FFN width
// in mlp_widths (Nemotron-H's feed_forward_length; empty: none), an MLP alone; else of kind `recurrent`.
// Empty when an array is shorter than num_layers.
std::vector<LayerKind> layer_kinds_from_kv_heads(const std::vector<int64_t>& kv_heads,
                                                 const std::vector<int64_t>& mlp_widths, LayerKind recurrent,
                                                 int num_layers);
}  // namespace cbatch
