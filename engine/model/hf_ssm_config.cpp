// Short-conv and Mamba-2 families' config.json fields (hf_ssm_config.hpp), as the Hub ships them and
// transformers 5 saves them:
// - LFM2: conv_L_cache (the conv's taps; conv_bias must be false), norm_eps, and the FFN width rule of
//   Lfm2MLP (block_auto_adjust_ff_dim: int(2 * intermediate_size / 3), times block_ffn_dim_multiplier,
//   rounded up to block_multiple_of);
// - Granite 4.0-H: mamba_n_heads, mamba_d_head ("auto": mamba_expand * hidden_size / heads), mamba_d_state,
//   mamba_n_groups, mamba_d_conv (mamba_conv_bias true, mamba_proj_bias false), time_step_limit; the
//   multipliers (embedding_, residual_, attention_multiplier, logits_scaling); position_embedding_type
//   "nope" (no RoPE) or "rope"; num_local_experts > 0: every FFN experts of intermediate_size (softmax over
//   the top-k logits, i.e. the top k renormalised) beside the shared MLP of shared_intermediate_size, else
//   that shared MLP alone;
// - Nemotron-H: mamba_num_heads, mamba_head_dim, ssm_state_size, n_groups, conv_kernel (use_conv_bias true,
//   use_bias, mlp_bias, attention_bias false), dt clamped below at time_step_min as its mixer does,
//   layer_norm_epsilon; attention without positions.
#include "engine/model/hf_ssm_config.hpp"

#include <cmath>

#include "engine/model/model_checks.hpp"

namespace cbatch {
namespace {

void require_bool(const JsonFields& f, const char* key, bool fallback, bool wanted) {
  if (f.get_bool(key, fallback) != wanted) {
    f.fail(key, std::string("= ") + (wanted ? "false" : "true") + " is not supported (only " + (wanted ? "true" : "false") + ")");
  }
}

void read_lfm2(const JsonFields& f, ModelConfig& c) {
  c.short_conv_kernel = f.get_size("conv_L_cache");
  require_bool(f, "conv_bias", false, false);
  c.rms_eps = static_cast<float>(f.get_number("norm_eps", c.rms_eps));
  if (!f.get_bool("block_auto_adjust_ff_dim", false)) return;
  int64_t width = 2LL * c.hidden_dim / 3;
  if (f.has("block_ffn_dim_multiplier")) width = static_cast<int64_t>(f.get_number("block_ffn_dim_multiplier", 1.0) * width);
  const int multiple = f.get_size("block_multiple_of", 256);
  width = multiple * ((width + multiple - 1) / multiple);
  if (width < 1 || width > (1 << 20)) f.fail("intermediate_size", "gives an FFN width of " + std::to_string(width));
  c.hidden_dim = static_cast<int>(width);
}

// time_step_limit [low, high]; transformers 5 writes infinity as {"__float__": "Infinity"} (no upper clamp).
void read_dt_limit(const JsonFields& f, Mamba2Sizes& m) {
  if (!f.has("time_step_limit")) return;
  int index = 0;
  for (simdjson::dom::element e : f.array("time_step_limit")) {
    double v = 0;
    const bool number = e.get_double().get(v) == simdjson::SUCCESS;
    if (number && !(v >= 0)) f.fail("time_step_limit", "must hold non-negative numbers");
    if (index == 0 && number) m.dt_min = static_cast<float>(v);
    if (index == 1 && number && std::isfinite(v)) m.dt_max = static_cast<float>(v);
    ++index;
  }
  if (index != 2) f.fail("time_step_limit", "must hold two values");
}

void read_granite_ffn(const JsonFields& f, ModelConfig& c) {
  const int experts = f.has("num_local_experts") ? static_cast<int>(f.get_int("num_local_experts")) : 0;
  const int shared = f.get_size("shared_intermediate_size");
  if (experts <= 0) {  // the shared MLP alone: a dense FFN
    c.hidden_dim = shared;
    return;
  }
  if (experts > kMaxExperts) f.fail("num_local_experts", "= " + std::to_string(experts) + " is above " + std::to_string(kMaxExperts));
  c.num_experts = experts;
  c.experts_per_token = f.get_size("num_experts_per_tok");
  if (c.experts_per_token > experts) f.fail("num_experts_per_tok", "is above num_local_experts");
  c.expert_hidden_dim = c.hidden_dim;
  c.shared_expert_hidden_dim = shared;
  c.shared_expert_gate = false;
  c.norm_topk_prob = true;
  c.layer_sparse.assign(static_cast<size_t>(c.num_layers), 1);
}

void read_granite(const JsonFields& f, ModelConfig& c) {
  Mamba2Sizes& m = c.mamba;
  m.num_heads = f.get_size("mamba_n_heads", 128);
  const int inner = f.get_size("mamba_expand", 2) * c.dim;
  const bool auto_dim = !f.has("mamba_d_head") || f.at("mamba_d_head").is_string();
  if (auto_dim && inner % m.num_heads != 0) {
    f.fail("mamba_n_heads", "= " + std::to_string(m.num_heads) + " does not divide mamba_expand * hidden_size = " + std::to_string(inner));
  }
  m.head_dim = auto_dim ? inner / m.num_heads : f.get_size("mamba_d_head");
  m.state_size = f.get_size("mamba_d_state", 256);
  m.num_groups = f.get_size("mamba_n_groups", 1);
  m.conv_kernel = f.get_size("mamba_d_conv", 4);
  if (m.num_heads % m.num_groups != 0) {
    f.fail("mamba_n_heads", "= " + std::to_string(m.num_heads) + " is not a multiple of mamba_n_groups = " + std::to_string(m.num_groups));
  }
  require_bool(f, "mamba_conv_bias", true, true);
  require_bool(f, "mamba_proj_bias", false, false);
  read_dt_limit(f, m);
  c.embedding_scale = static_cast<float>(f.get_number("embedding_multiplier", 1.0));
  c.residual_scale = static_cast<float>(f.get_number("residual_multiplier", 1.0));
  c.attn_scale = static_cast<float>(f.get_number("attention_multiplier", 1.0 / std::sqrt(c.head_dim)));
  c.logit_divisor = static_cast<float>(f.get_number("logits_scaling", 1.0));
  if (!(c.logit_divisor > 0.0f) || !(c.residual_scale > 0.0f)) f.fail("logits_scaling", "and residual_multiplier must be positive");
  const std::string positions = f.get_string("position_embedding_type", "rope");
  if (positions != "nope" && positions != "rope") f.fail("position_embedding_type", "'" + positions + "' is not supported (nope or rope)");
  if (positions == "nope") c.layer_nope.assign(static_cast<size_t>(c.num_layers), 1);
  read_granite_ffn(f, c);
}

void read_nemotron_h(const JsonFields& f, ModelConfig& c) {
  Mamba2Sizes& m = c.mamba;
  m.num_heads = f.get_size("mamba_num_heads");
  m.head_dim = f.get_size("mamba_head_dim");
  m.state_size = f.get_size("ssm_state_size");
  m.num_groups = f.get_size("n_groups");
  m.conv_kernel = f.get_size("conv_kernel");
  if (m.num_heads % m.num_groups != 0) {
    f.fail("mamba_num_heads", "= " + std::to_string(m.num_heads) + " is not a multiple of n_groups = " + std::to_string(m.num_groups));
  }
  m.dt_min = static_cast<float>(f.get_number("time_step_min", 0.001));
  require_bool(f, "use_conv_bias", true, true);
  for (const char* key : {"use_bias", "mlp_bias", "attention_bias"}) require_bool(f, key, false, false);
  c.rms_eps = static_cast<float>(f.get_number("layer_norm_epsilon", c.rms_eps));
  c.layer_nope.assign(static_cast<size_t>(c.num_layers), 1);
}

}  // namespace

void read_ssm_fields(const JsonFields& f, const Family& family, ModelConfig& c) {
  if (family.recurrent_kind == LayerKind::kShortConv) return read_lfm2(f, c);
  c.decay_from_log = true;  // A_log
  if (family.nemotron_layers) return read_nemotron_h(f, c);
  read_granite(f, c);
}

}  // namespace cbatch
