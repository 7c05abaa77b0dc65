// Hybrid families' config.json fields (hf_hybrid_config.hpp), transformers 5's spellings (Qwen3.5's
// text_config): layer_types of linear_attention / full_attention (and LFM2's conv, Granite's mamba /
// attention), or every full_attention_interval-th layer attention (4 when absent), LFM2's full_attn_idxs,
// Nemotron-H's hybrid_override_pattern; the other recurrent kinds' fields: hf_ssm_config.cpp; linear_num_key_heads, linear_num_value_heads, linear_key_head_dim,
// linear_value_head_dim, linear_conv_kernel_dim; A_log as stored (decay_from_log), value heads grouped by key
// head (not tiled). The multimodal rope sections (mrope_section) give every axis a text token's position, so
// they reduce to one rotation and are not read.
#include "engine/model/hf_hybrid_config.hpp"

#include <cmath>
#include <optional>

#include "engine/model/hf_ssm_config.hpp"
#include "engine/model/layer_kinds.hpp"

namespace cbatch {
namespace {

// transformers 5's rope_parameters (flat, or that of full_attention layers), else transformers 4's top level.
const JsonFields* rope_parameters(const JsonFields& f, std::optional<JsonFields>& holder) {
  if (!f.has("rope_parameters")) return nullptr;
  holder = f.object("rope_parameters");
  if (holder->has("full_attention")) holder = holder->object("full_attention");
  return &*holder;
}

// Nemotron-H's hybrid_override_pattern, one character per layer.
std::vector<LayerKind> read_pattern(const JsonFields& f, int num_layers) {
  const std::string pattern = f.get_string("hybrid_override_pattern");
  size_t bad_at = 0;
  const std::optional<std::vector<LayerKind>> kinds = layer_kinds_from_pattern(pattern, &bad_at);
  if (!kinds) {
    f.fail("hybrid_override_pattern", "holds '" + pattern.substr(bad_at, 1) + "' at position " + std::to_string(bad_at) +
                                          ", a layer type cbatch does not run (supported: M Mamba-2, * attention, - MLP)");
  }
  if (static_cast<int>(kinds->size()) != num_layers) {
    f.fail("hybrid_override_pattern", "has " + std::to_string(kinds->size()) + " layers, num_hidden_layers says " +
                                          std::to_string(num_layers));
  }
  return *kinds;
}

// LFM2's full_attn_idxs: the attention layers' indices, the others short conv.
std::vector<LayerKind> read_attention_indices(const JsonFields& f, int num_layers) {
  std::vector<LayerKind> kinds(static_cast<size_t>(num_layers), LayerKind::kShortConv);
  for (simdjson::dom::element e : f.array("full_attn_idxs")) {
    int64_t l = -1;
    if (e.get_int64().get(l) != simdjson::SUCCESS || l < 0 || l >= num_layers) {
      f.fail("full_attn_idxs", "must list layer indices below num_hidden_layers (" + std::to_string(num_layers) + ")");
    }
    kinds[static_cast<size_t>(l)] = LayerKind::kAttention;
  }
  return kinds;
}

std::vector<LayerKind> read_layer_kinds(const JsonFields& f, const Family& family, int num_layers) {
  if (family.nemotron_layers) return read_pattern(f, num_layers);
  if (!f.has("layer_types")) {
    if (family.recurrent_kind == LayerKind::kShortConv && f.has("full_attn_idxs")) return read_attention_indices(f, num_layers);
    if (family.recurrent_kind != LayerKind::kDeltaNet) f.fail("layer_types", "is missing (each layer's type)");
    const int interval = f.get_size("full_attention_interval", 4);
    return layer_kinds_from_interval(num_layers, interval);
  }
  std::vector<LayerKind> kinds;
  for (simdjson::dom::element e : f.array("layer_types")) {
    std::string_view type;
    if (e.get_string().get(type) != simdjson::SUCCESS) f.fail("layer_types", "must be a list of strings");
    const std::optional<LayerKind> kind = layer_kind_of_type(type, family.recurrent_kind);
    if (!kind) {
      f.fail("layer_types", "holds '" + std::string(type) + "', a layer type cbatch does not run for " +
                                std::string(family.name) + " (supported: " + supported_layer_types(family.recurrent_kind) + ")");
    }
    kinds.push_back(*kind);
  }
  if (static_cast<int>(kinds.size()) != num_layers) {
    f.fail("layer_types", "has " + std::to_string(kinds.size()) + " entries for " + std::to_string(num_layers) +
                              " layers (num_hidden_layers)");
  }
  return kinds;
}

DeltaNetSizes read_deltanet_sizes(const JsonFields& f) {
  DeltaNetSizes d;
  d.num_k_heads = f.get_size("linear_num_key_heads");
  d.num_v_heads = f.get_size("linear_num_value_heads");
  d.k_head_dim = f.get_size("linear_key_head_dim");
  d.v_head_dim = f.get_size("linear_value_head_dim");
  d.conv_kernel = f.get_size("linear_conv_kernel_dim");
  if (d.num_v_heads % d.num_k_heads != 0) {
    f.fail("linear_num_value_heads", "= " + std::to_string(d.num_v_heads) + " is not a multiple of linear_num_key_heads = " +
                                         std::to_string(d.num_k_heads));
  }
  return d;
}

}  // namespace

void read_rotary_dim(const JsonFields& f, const Family& family, ModelConfig& c) {
  std::optional<JsonFields> holder;
  const JsonFields* rope = rope_parameters(f, holder);
  const char* key = "partial_rotary_factor";
  const double fallback = family.default_rotary_factor > 0 ? family.default_rotary_factor : 1.0;
  const double factor = rope != nullptr && rope->has(key) ? rope->get_number(key, fallback) : f.get_number(key, fallback);
  if (factor == 1.0) return;
  const JsonFields& where = rope != nullptr && rope->has(key) ? *rope : f;
  if (family.default_rotary_factor == 0) where.fail(key, "is not supported (only full rotary embeddings are)");
  const int dims = static_cast<int>(std::floor(c.head_dim * factor));
  if (!(factor > 0 && factor <= 1) || dims < 2 || dims % 2 != 0) {
    where.fail(key, "= " + std::to_string(factor) + " gives " + std::to_string(dims) + " rotary dims of head_dim " +
                        std::to_string(c.head_dim) + " (need an even number from 2 to head_dim)");
  }
  c.rotary_dim = dims;
}

void read_hybrid_fields(const JsonFields& f, const Family& family, ModelConfig& c, std::vector<std::string>& notes) {
  if (!has_recurrent_kind(family)) return;
  c.layer_kinds = read_layer_kinds(f, family, c.num_layers);
  if (family.recurrent_kind != LayerKind::kDeltaNet) return read_ssm_fields(f, family, c);
  c.deltanet = read_deltanet_sizes(f);
  c.deltanet.grouped_qkvz = c.deltanet.grouped_ba = family.deltanet_grouped_projections;
  c.decay_from_log = true;
  const int mtp = f.has("mtp_num_hidden_layers") ? f.get_size("mtp_num_hidden_layers") : 0;
  if (mtp > 0) notes.push_back(std::to_string(mtp) + " multi-token-prediction layer(s) (mtp.*) skipped: generation does not use them");
}

}  // namespace cbatch
