// Derived architecture numbers: query scale, what a layer kind keeps per sequence (layer_state), its name, the family's
// features in words, and RoPE frequencies (llama3, linear, yarn and longrope scaling; local layers' own base).
#include "engine/model/model_config.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace cbatch {

bool ModelConfig::has_window() const {
  return std::any_of(layer_window.begin(), layer_window.end(), [](int w) { return w > 0; });
}

int ModelConfig::num_attention_layers() const {
  int n = 0;
  for (int l = 0; l < num_layers; ++l) n += is_attention(l) && writes_kv(l);
  return n;
}

int ModelConfig::attention_index(int layer) const {
  const int source = kv_source(layer);
  int n = 0;
  for (int l = 0; l < source; ++l) n += is_attention(l) && writes_kv(l);
  return n;
}

int ModelConfig::max_head_dim() const {
  int m = head_dim;
  for (int l = 0; l < num_layers; ++l) m = std::max(m, head_dim_of(l));
  return m;
}

int ModelConfig::max_kv_dim() const {
  int m = kv_dim();
  for (int l = 0; l < num_layers; ++l) m = std::max(m, kv_dim_of(l));
  return m;
}

int ModelConfig::max_hidden() const {
  int m = hidden_dim;
  for (int l = 0; l < num_layers; ++l) m = std::max(m, hidden_of(l));
  return m;
}

int64_t ModelConfig::kv_slot_values() const { return kv_values_before(num_layers); }

int64_t ModelConfig::kv_values_before(int layer) const {
  const int end = layer < num_layers ? kv_source(layer) : num_layers;
  int64_t n = 0;
  for (int l = 0; l < end; ++l) n += is_attention(l) && writes_kv(l) ? kv_dim_of(l) : 0;
  return n;
}

int ModelConfig::rotary_dims_of(bool local) const {
  return !local && global_head_dim > 0 ? global_head_dim : rotary_dims();
}

LayerState ModelConfig::layer_state(int layer) const {
  switch (layer_kind(layer)) {
    case LayerKind::kDeltaNet:
      return {static_cast<int64_t>(deltanet.conv_kernel - 1) * deltanet.conv_dim(),
              static_cast<int64_t>(deltanet.num_v_heads) * deltanet.k_head_dim * deltanet.v_head_dim};
    case LayerKind::kShortConv: return {static_cast<int64_t>(short_conv_kernel - 1) * dim, 0};
    case LayerKind::kMamba2:
      return {static_cast<int64_t>(mamba.conv_kernel - 1) * mamba.conv_dim(),
              static_cast<int64_t>(mamba.inner()) * mamba.state_size};
    case LayerKind::kAttention:
    case LayerKind::kMlp: break;
  }
  return {};
}

bool ModelConfig::is_recurrent(int layer) const {
  const LayerKind kind = layer_kind(layer);
  return kind == LayerKind::kDeltaNet || kind == LayerKind::kShortConv || kind == LayerKind::kMamba2;
}

bool ModelConfig::has_recurrent_layers() const {
  for (int l = 0; l < static_cast<int>(layer_kinds.size()); ++l) {
    if (is_recurrent(l)) return true;
  }
  return false;
}

float ModelConfig::query_scale() const {
  return attn_scale > 0.0f ? attn_scale : 1.0f / std::sqrt(static_cast<float>(head_dim));
}

std::string_view layer_kind_name(LayerKind kind) {
  switch (kind) {
    case LayerKind::kAttention: return "attention";
    case LayerKind::kDeltaNet: return "gated DeltaNet";
    case LayerKind::kShortConv: return "short conv";
    case LayerKind::kMamba2: return "Mamba-2";
    case LayerKind::kMlp: return "MLP";
  }
  return "?";
}

namespace {

// "hybrid: 2 gated DeltaNet and 2 attention layers (...sizes)": the layers by kind, then each recurrent kind's
// sizes.
std::string hybrid_features(const ModelConfig& c) {
  constexpr LayerKind kOrder[] = {LayerKind::kDeltaNet, LayerKind::kShortConv, LayerKind::kMamba2,
                                  LayerKind::kAttention, LayerKind::kMlp};
  std::vector<std::string> parts;
  for (LayerKind kind : kOrder) {
    const auto n = std::count(c.layer_kinds.begin(), c.layer_kinds.end(), kind);
    if (n > 0) parts.push_back(std::to_string(n) + " " + std::string(layer_kind_name(kind)));
  }
  std::string out = "hybrid: ";
  for (size_t i = 0; i < parts.size(); ++i) {
    out += (i == 0 ? "" : i + 1 == parts.size() ? " and " : ", ") + parts[i];
  }
  out += " layers";
  std::vector<std::string> sizes;
  auto has = [&](LayerKind kind) { return std::find(c.layer_kinds.begin(), c.layer_kinds.end(), kind) != c.layer_kinds.end(); };
  if (has(LayerKind::kDeltaNet)) {
    const DeltaNetSizes& d = c.deltanet;
    sizes.push_back(std::to_string(d.num_k_heads) + " key and " + std::to_string(d.num_v_heads) + " value heads of " +
                    std::to_string(d.k_head_dim) + " and " + std::to_string(d.v_head_dim) + ", conv kernel " +
                    std::to_string(d.conv_kernel));
  }
  if (has(LayerKind::kShortConv)) sizes.push_back("short conv kernel " + std::to_string(c.short_conv_kernel));
  if (has(LayerKind::kMamba2)) {
    const Mamba2Sizes& m = c.mamba;
    sizes.push_back("Mamba-2: " + std::to_string(m.num_heads) + " heads of " + std::to_string(m.head_dim) + ", state " +
                    std::to_string(m.state_size) + ", " + std::to_string(m.num_groups) + " groups, conv kernel " +
                    std::to_string(m.conv_kernel));
  }
  for (size_t i = 0; i < sizes.size(); ++i) out += (i == 0 ? " (" : "; ") + sizes[i];
  return sizes.empty() ? out : out + ")";
}

}  // namespace

std::string ModelConfig::features() const {
  std::ostringstream out;
  auto add = [&](const std::string& s) { out << (out.tellp() > 0 ? ", " : "") << s; };
  if (norm_offset != 0.0f) add("norm (" + std::to_string(static_cast<int>(norm_offset)) + " + w)");
  if (qkv_bias) add("qkv bias");
  if (o_bias) add("output projection bias");
  if (attn_sinks) add("attention sinks");
  if (!layer_kinds.empty()) add(hybrid_features(*this));
  if (attn_output_gate) add("attention output gate");
  if (global_head_dim > 0) {
    add("global layers: head dim " + std::to_string(global_head_dim) + ", " + std::to_string(kv_heads_of(num_layers - 1)) +
        " K/V heads" + (global_rope_fraction > 0.0f ? ", proportional RoPE over " + std::to_string(global_rope_fraction) : "") +
        (global_values_are_keys ? ", values are the keys" : ""));
  }
  if (value_norm) add("V norm");
  if (!layer_kv_source.empty()) {
    int shared = 0;
    for (int l = 0; l < num_layers; ++l) shared += !writes_kv(l);
    add("K/V shared: " + std::to_string(shared) + " of " + std::to_string(num_layers) + " layers read an earlier layer's cache" +
        (double_wide_shared ? " (their FFN double wide)" : ""));
  }
  if (per_layer_dim > 0) add("per-layer inputs of " + std::to_string(per_layer_dim));
  if (layer_scalar) add("layer output scalars");
  if (rotary_dims() != head_dim) add("partial rotary (" + std::to_string(rotary_dims()) + " of " + std::to_string(head_dim) + " dims)");
  if (qk_norm) add(qk_norm_whole ? "q/k norm over the whole projection" : "q/k norm");
  if (sandwich_norms) add("sandwich norms");
  if (is_encoder()) add("encoder (bidirectional attention, no lm_head)");
  if (num_labels > 0) add("sequence classification head (" + std::to_string(num_labels) + " labels)");
  if (learned_positions) {
    add(position_pad_id >= 0 ? "learned absolute positions from row " + std::to_string(position_offset) + ", pad tokens (id " +
                                   std::to_string(position_pad_id) + ") not counted"
                             : "learned absolute positions");
  }
  if (token_types) add("token type embeddings");
  if (layer_norm) add("LayerNorm with bias");
  if (post_norm) add("post-norm");
  if (activation == Activation::kGeluTanh) add(gated_ffn ? "GeGLU (tanh GELU)" : "tanh GELU FFN");
  if (activation == Activation::kGeluErf) add(gated_ffn ? "GeGLU (erf GELU)" : "GELU FFN with biases");
  if (activation == Activation::kSwigluClamped) {
    add("clamped SwiGLU (limit " + std::to_string(swiglu_limit) + ", alpha " + std::to_string(swiglu_alpha) + ")");
  }
  if (activation == Activation::kRelu2) add("relu^2 MLP");
  if (single_sublayer) add("one sublayer per layer (a mixer or an MLP)");
  if (embedding_scale != 1.0f) add("embedding scale " + std::to_string(embedding_scale));
  if (residual_scale != 1.0f) add("residual multiplier " + std::to_string(residual_scale));
  if (logit_divisor != 1.0f) add("logits divided by " + std::to_string(logit_divisor));
  if (attn_scale > 0.0f) add("query scale " + std::to_string(attn_scale));
  if (attn_softcap > 0.0f) add("attention softcap " + std::to_string(attn_softcap));
  if (final_softcap > 0.0f) add("final softcap " + std::to_string(final_softcap));
  if (has_window()) {
    int windowed = 0, window = 0;
    for (int w : layer_window) windowed += w > 0, window = std::max(window, w);
    add("sliding window " + std::to_string(window) + " on " + std::to_string(windowed) + " of " +
        std::to_string(num_layers) + " layers");
  }
  if (rope_theta_local > 0.0f) add("local rope_theta " + std::to_string(static_cast<int64_t>(rope_theta_local)));
  if (!layer_nope.empty()) {
    const auto nope = std::count(layer_nope.begin(), layer_nope.end(), uint8_t{1});
    add("no RoPE (NoPE) on " + std::to_string(nope) + " of " + std::to_string(num_layers) + " layers");
  }
  if (is_moe()) {
    int sparse = 0;
    for (int l = 0; l < num_layers; ++l) sparse += is_sparse(l);
    const std::string rule = moe_router == MoeRouter::kTopkSoftmax ? " of the logits, softmax over them"
                             : norm_topk_prob                       ? " renormalised"
                                                                    : " not renormalised";
    add("mixture of experts: " + std::to_string(num_experts) + " experts, top-" + std::to_string(experts_per_token) +
        rule + (router_bias ? ", router bias" : "") + (expert_bias ? ", expert biases" : "") + ", expert width " +
        std::to_string(expert_hidden_dim) + ", sparse FFN on " + std::to_string(sparse) + " of " +
        std::to_string(num_layers) + " layers");
    if (experts_beside_dense) add("experts beside the dense MLP (router input scale, per-expert scales)");
    if (shared_expert_hidden_dim > 0) {
      add("shared expert width " + std::to_string(shared_expert_hidden_dim) + (shared_expert_gate ? " (sigmoid gate)" : " (no gate)"));
    }
  }
  return out.str();
}

namespace {

const double kPi = 3.14159265358979323846;

// Llama 3.1 frequency scaling: long wavelengths are divided by `factor`, short ones are kept, the band
// between is interpolated smoothly.
double llama3_freq(const RopeScaling& s, double freq) {
  const double low_wavelen = s.original_max_position / s.low_freq_factor;
  const double high_wavelen = s.original_max_position / s.high_freq_factor;
  const double wavelen = 2.0 * kPi / freq;
  if (wavelen > low_wavelen) return freq / s.factor;
  if (wavelen < high_wavelen) return freq;
  const double smooth = (s.original_max_position / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
  return (1.0 - smooth) * freq / s.factor + smooth * freq;
}

// YaRN: frequencies that turn fewer than beta_slow times over the original context are interpolated
// (divided by factor), those that turn more than beta_fast times are kept, with a linear ramp between.
// The ramp's ends are rounded out to whole dims unless the config says truncate: false (gpt-oss).
double yarn_freq(const RopeScaling& s, double theta, int head_dim, int i, double freq) {
  auto correction_dim = [&](double rotations) {
    return head_dim * std::log(s.original_max_position / (rotations * 2.0 * kPi)) / (2.0 * std::log(theta));
  };
  double low = correction_dim(s.beta_fast), high = correction_dim(s.beta_slow);
  if (s.truncate) low = std::floor(low), high = std::ceil(high);
  low = std::max(0.0, low);
  high = std::min(static_cast<double>(head_dim - 1), high);
  if (low == high) high += 0.001;
  const double ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);
  const double extrapolation = 1.0 - ramp;  // the share of the unscaled frequency
  return freq / s.factor * (1.0 - extrapolation) + freq * extrapolation;
}

}  // namespace

void rope_inv_freq(const ModelConfig& config, float* inv_freq, bool local, bool long_range) {
  const int rotary = config.rotary_dims_of(local);
  const int half = rotary / 2;
  // Proportional RoPE (Gemma 4's global layers): the first fraction of the frequencies turn, the rest are 0.
  const int turning = !local && config.global_rope_fraction > 0.0f
                          ? static_cast<int>(config.global_rope_fraction * rotary / 2) : half;
  const double theta = local && config.rope_theta_local > 0.0f ? config.rope_theta_local : config.rope_theta;
  const RopeScaling& s = config.rope_scaling;
  const RopeScalingType type = local ? RopeScalingType::kNone : s.type;
  for (int i = 0; i < half; ++i) {
    double freq = 1.0 / std::pow(theta, 2.0 * i / rotary);
    switch (type) {
      case RopeScalingType::kNone: break;
      case RopeScalingType::kLinear: freq /= s.factor; break;
      case RopeScalingType::kLlama3: freq = llama3_freq(s, freq); break;
      case RopeScalingType::kYarn: freq = yarn_freq(s, theta, rotary, i, freq); break;
      case RopeScalingType::kLongrope: {
        const std::vector<float>& divisors = long_range ? s.long_factor : s.short_factor;
        freq /= divisors[static_cast<size_t>(i)];
        break;
      }
    }
    inv_freq[i] = i < turning ? static_cast<float>(freq) : 0.0f;
  }
}

float rope_attention_factor(const ModelConfig& config, bool local) {
  const RopeScalingType type = config.rope_scaling.type;
  const bool scaled = type == RopeScalingType::kYarn || type == RopeScalingType::kLongrope;
  return local || !scaled ? 1.0f : config.rope_scaling.attention_factor;
}

}  // namespace cbatch
