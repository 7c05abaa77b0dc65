// Gemma 4's config.json fields (hf_gemma4_config.hpp), transformers' Gemma4TextConfig: global_head_dim and
// num_global_key_value_heads (the latter only with attention_k_eq_v), or, as transformers 5 saves them,
// per_layer_config's full-attention entries; rope_parameters.full_attention's proportional RoPE
// (partial_rotary_factor; its factor divides every frequency, as linear scaling); num_kv_shared_layers
// (kv_sharing_modes: the last ones reuse the last earlier non-shared layer of their layer type);
// use_double_wide_mlp (on the shared layers only); hidden_size_per_layer_input with
// vocab_size_per_layer_input equal to vocab_size; enable_moe_block with num_experts, top_k_experts and
// moe_intermediate_size (the experts beside every layer's dense MLP).
#include "engine/model/hf_gemma4_config.hpp"

#include <optional>

#include "engine/base/error.hpp"
#include "engine/model/layer_kinds.hpp"

namespace cbatch {
namespace {

// The first full-attention (window 0) layer's override of `key` in per_layer_config, if any.
std::optional<int> per_layer_override(const JsonFields& f, const ModelConfig& c, const char* key) {
  if (!f.has("per_layer_config")) return std::nullopt;
  const JsonFields overrides = f.object("per_layer_config");
  for (int l = 0; l < c.num_layers; ++l) {
    const std::string index = std::to_string(l);
    if (c.window(l) != 0 || !overrides.has(index.c_str())) continue;
    const JsonFields layer = overrides.object(index.c_str());
    if (layer.has(key)) return layer.get_size(key);
  }
  return std::nullopt;
}

// Proportional RoPE of the global layers: its turning share (0: every frequency turns).
float read_global_rope(const JsonFields& f) {
  if (!f.has("rope_parameters")) return 0.25f;  // transformers' default: proportional, 0.25
  const JsonFields p = f.object("rope_parameters");
  if (p.has("sliding_attention")) {
    const JsonFields s = p.object("sliding_attention");
    const std::string type = s.get_string("rope_type", "default");
    if (type != "default") s.fail("rope_type", "'" + type + "' is not supported on sliding layers (only default)");
    if (s.get_number("partial_rotary_factor", 1.0) != 1.0) s.fail("partial_rotary_factor", "is not supported on sliding layers (only 1)");
  }
  if (!p.has("full_attention")) return 0.0f;
  const JsonFields g = p.object("full_attention");
  const std::string type = g.get_string("rope_type", "default");
  if (type != "proportional") {
    if (g.get_number("partial_rotary_factor", 1.0) != 1.0) g.fail("partial_rotary_factor", "needs rope_type proportional");
    return 0.0f;
  }
  const double fraction = g.get_number("partial_rotary_factor", 1.0);
  if (!(fraction > 0.0 && fraction <= 1.0)) g.fail("partial_rotary_factor", "must be in (0, 1]");
  return fraction == 1.0 ? 0.0f : static_cast<float>(fraction);
}

void read_per_layer_inputs(const JsonFields& f, ModelConfig& c) {
  c.per_layer_dim = f.is_null("hidden_size_per_layer_input") || !f.has("hidden_size_per_layer_input")
                        ? 0 : static_cast<int>(f.get_int("hidden_size_per_layer_input"));
  if (c.per_layer_dim < 0 || c.per_layer_dim > (1 << 14)) {
    f.fail("hidden_size_per_layer_input", "= " + std::to_string(c.per_layer_dim) + " is out of range (0.." + std::to_string(1 << 14) + ")");
  }
  if (c.per_layer_dim > 0 && f.has("vocab_size_per_layer_input")) {
    const int64_t vocab = f.get_int("vocab_size_per_layer_input");
    if (vocab != c.vocab_size) {
      f.fail("vocab_size_per_layer_input", "= " + std::to_string(vocab) + " differs from vocab_size " + std::to_string(c.vocab_size) +
                                               " (every token needs its per-layer row)");
    }
  }
}

// The 26B-A4B's MoE block: on every layer, beside the dense MLP.
void read_moe_block(const JsonFields& f, ModelConfig& c) {
  c.num_experts = f.get_size("num_experts");
  if (c.num_experts > (1 << 12)) f.fail("num_experts", "= " + std::to_string(c.num_experts) + " is out of range");
  c.experts_per_token = f.get_size("top_k_experts");
  if (c.experts_per_token > c.num_experts) {
    f.fail("top_k_experts", "= " + std::to_string(c.experts_per_token) + " is above num_experts " + std::to_string(c.num_experts));
  }
  c.expert_hidden_dim = f.get_size("moe_intermediate_size");
  c.norm_topk_prob = true;
  c.moe_router = MoeRouter::kSoftmaxTopk;
  c.experts_beside_dense = true;
  c.layer_sparse.assign(static_cast<size_t>(c.num_layers), 1);
}

}  // namespace

void read_gemma4_fields(const JsonFields& f, ModelConfig& c, std::vector<std::string>& notes) {
  c.norm_offset = 0.0f;  // Gemma4RMSNorm scales by w
  c.attn_scale = 1.0f;   // scaling 1.0: the q norm takes the place of 1 / sqrt(head_dim)
  c.attn_softcap = 0.0f;
  c.value_norm = c.layer_scalar = true;
  if (f.get_string("use_bidirectional_attention", "vision") == "all") {
    f.fail("use_bidirectional_attention", "'all' is not supported (text is causal)");
  }
  if (f.get_bool("attention_bias", false)) f.fail("attention_bias", "is not supported (Gemma 4 has none)");
  if (c.layer_window.empty()) f.fail("sliding_window", "is required (Gemma 4's sliding layers)");
  const std::optional<int> head = per_layer_override(f, c, "head_dim");
  c.global_head_dim = f.has("global_head_dim") ? f.get_size("global_head_dim") : head.value_or(512);
  c.global_values_are_keys = f.get_bool("attention_k_eq_v", false);
  const std::optional<int> kv_heads = per_layer_override(f, c, "num_key_value_heads");
  if (f.has("num_global_key_value_heads") && c.global_values_are_keys) {
    c.global_kv_heads = f.get_size("num_global_key_value_heads");
  } else if (kv_heads) {
    c.global_kv_heads = *kv_heads;
  }
  if (c.global_kv_heads > 0 && c.num_heads % c.global_kv_heads != 0) {
    f.fail("num_global_key_value_heads", "= " + std::to_string(c.global_kv_heads) + " does not divide num_attention_heads " +
                                             std::to_string(c.num_heads));
  }
  c.global_rope_fraction = read_global_rope(f);
  const int64_t shared = f.has("num_kv_shared_layers") ? f.get_int("num_kv_shared_layers") : 0;
  c.layer_kv_source = shared_kv_sources(c.layer_window, c.num_layers, shared,
                                        "'" + f.path() + "': " + f.name("num_kv_shared_layers"));
  c.double_wide_shared = f.get_bool("use_double_wide_mlp", false);
  read_per_layer_inputs(f, c);
  if (f.get_bool("enable_moe_block", false)) read_moe_block(f, c);
  (void)notes;
}

}  // namespace cbatch
