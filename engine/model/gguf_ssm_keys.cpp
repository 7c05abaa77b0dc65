// The GGUF keys of the short-conv and Mamba-2 families (gguf_hybrid_keys.hpp: read_ssm_keys), under `{arch}.`,
// as llama.cpp's converter writes them: attention.head_count_kv per layer (0: recurrent) and, for Nemotron-H,
// feed_forward_length per layer (nonzero: an MLP layer); LFM2's shortconv.l_cache; a Mamba-2's ssm.conv_kernel,
// ssm.state_size, ssm.group_count, ssm.time_step_rank (heads) and ssm.inner_size (heads * head dim), A stored
// as -exp(A_log) (decay_from_log false) and no dt clamp (llama.cpp applies none); Granite's embedding_scale,
// residual_scale, logit_scale (attention.scale is every family's), its attention without RoPE when
// rope.scaling.finetuned is false and its dense FFN of expert_shared_feed_forward_length; Nemotron-H's
// attention.layer_norm_epsilon and attention without RoPE. Errors name the file and the key.
#include "engine/base/error.hpp"
#include "engine/model/gguf_hybrid_keys.hpp"
#include "engine/model/layer_kinds.hpp"

namespace cbatch {
namespace {

[[noreturn]] void fail(const GgufFile& gguf, const std::string& key, const std::string& problem) {
  throw Error("'" + gguf.path() + "': " + key + " " + problem);
}

int size_key(const GgufFile& gguf, const std::string& key) {
  const int64_t v = gguf.get_int(key);
  if (v < 1 || v > (1 << 20)) fail(gguf, key, "= " + std::to_string(v) + " is out of range (1.." + std::to_string(1 << 20) + ")");
  return static_cast<int>(v);
}

std::vector<int64_t> per_layer(const GgufFile& gguf, const std::string& key) {
  const GgufValue* v = gguf.find(key);
  if (v == nullptr || v->type != GgufType::kArray) fail(gguf, key, "must be a per-layer array (0 on recurrent layers)");
  return gguf.get_ints(key);
}

std::vector<LayerKind> read_layer_kinds(const GgufFile& gguf, const Family& family, const std::string& p, int num_layers) {
  const std::vector<int64_t> kv_heads = per_layer(gguf, p + "attention.head_count_kv");
  const std::vector<int64_t> mlp = family.nemotron_layers ? per_layer(gguf, p + "feed_forward_length") : std::vector<int64_t>{};
  std::vector<LayerKind> kinds = layer_kinds_from_kv_heads(kv_heads, mlp, family.recurrent_kind, num_layers);
  if (kinds.empty()) {
    fail(gguf, p + (kv_heads.size() < static_cast<size_t>(num_layers) ? "attention.head_count_kv" : "feed_forward_length"),
         "has fewer values than block_count (" + std::to_string(num_layers) + ")");
  }
  return kinds;
}

Mamba2Sizes read_mamba_sizes(const GgufFile& gguf, const std::string& p) {
  Mamba2Sizes m;
  m.conv_kernel = size_key(gguf, p + "ssm.conv_kernel");
  m.state_size = size_key(gguf, p + "ssm.state_size");
  m.num_groups = size_key(gguf, p + "ssm.group_count");
  m.num_heads = size_key(gguf, p + "ssm.time_step_rank");
  const int inner = size_key(gguf, p + "ssm.inner_size");
  if (m.num_heads % m.num_groups != 0) {
    fail(gguf, p + "ssm.time_step_rank", "= " + std::to_string(m.num_heads) + " (heads) is not a multiple of " + p +
                                            "ssm.group_count = " + std::to_string(m.num_groups));
  }
  if (inner % m.num_heads != 0) {
    fail(gguf, p + "ssm.inner_size", "= " + std::to_string(inner) + " is not a multiple of " + p +
                                         "ssm.time_step_rank = " + std::to_string(m.num_heads));
  }
  m.head_dim = inner / m.num_heads;
  return m;
}

void read_granite_keys(const GgufFile& gguf, const std::string& p, ModelConfig& c) {
  c.embedding_scale = static_cast<float>(gguf.get_float(p + "embedding_scale", 1.0));
  c.residual_scale = static_cast<float>(gguf.get_float(p + "residual_scale", 1.0));
  c.logit_divisor = static_cast<float>(gguf.get_float(p + "logit_scale", 1.0));
  if (!(c.logit_divisor > 0.0f) || !(c.residual_scale > 0.0f)) fail(gguf, p + "logit_scale", "and residual_scale must be positive");
  if (!gguf.get_bool(p + "rope.scaling.finetuned", true)) c.layer_nope.assign(static_cast<size_t>(c.num_layers), 1);
  if (gguf.get_int(p + "expert_count", 0) == 0 && gguf.find(p + "expert_shared_feed_forward_length")) {
    c.hidden_dim = size_key(gguf, p + "expert_shared_feed_forward_length");  // the shared MLP alone
  }
}

}  // namespace

void read_ssm_keys(const GgufFile& gguf, const Family& family, const std::string& p, ModelConfig& c) {
  if (family.recurrent_kind != LayerKind::kShortConv && family.recurrent_kind != LayerKind::kMamba2) return;
  c.layer_kinds = read_layer_kinds(gguf, family, p, c.num_layers);
  if (family.recurrent_kind == LayerKind::kShortConv) {
    c.short_conv_kernel = size_key(gguf, p + "shortconv.l_cache");
    return;
  }
  c.mamba = read_mamba_sizes(gguf, p);
  c.decay_from_log = false;  // ssm_a holds A = -exp(A_log)
  if (family.granite_multipliers) read_granite_keys(gguf, p, c);
  if (family.nemotron_layers) {
    c.rms_eps = static_cast<float>(gguf.get_float(p + "attention.layer_norm_rms_epsilon",
                                                  gguf.get_float(p + "attention.layer_norm_epsilon", 1e-5)));
    c.layer_nope.assign(static_cast<size_t>(c.num_layers), 1);
  }
}

}  // namespace cbatch
