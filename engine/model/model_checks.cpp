// The checks and helpers every format loader shares: the config sanity limits (they keep size
// arithmetic far from int64 overflow), every tensor against its row of the tensor table (its shape, and
// there exactly when the model has the row), row slices of fused tensors and the dominant dtype. The
// loaders call these; nothing here knows a format.
#include "engine/model/model_checks.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include "engine/base/error.hpp"

namespace cbatch {
namespace {

void check_range(const std::string& path, const char* what, int64_t value, int64_t max) {
  if (value <= 0 || value > max) {
    throw Error("'" + path + "': " + what + " = " + std::to_string(value) + " is out of range (1.." +
                std::to_string(max) + ")");
  }
}

void check_shape(const std::string& path, const TensorView& t, std::string_view role, int64_t rows, int64_t cols) {
  if (t.empty()) throw Error("'" + path + "': tensor '" + t.name + "' (" + std::string(role) + ") has no data");
  if (t.rows != rows || t.cols != cols) {
    throw Error("'" + path + "': tensor '" + t.name + "' (" + std::string(role) + ") has shape (" +
                std::to_string(t.rows) + ", " + std::to_string(t.cols) + "), the config needs (" +
                std::to_string(rows) + ", " + std::to_string(cols) + ")");
  }
}

// A row's tensor: there with the row's shape where the model has the row, absent where it does not
// (nothing would read it).
void check_row(const std::string& path, const TensorView& t, std::string_view label, bool wanted, Shape shape,
               const ModelConfig& c, int layer = -1) {
  if (wanted) {
    if (t.empty()) throw Error("'" + path + "': the " + std::string(label) + " tensor of the architecture is missing");
    check_shape(path, t, label, size_of(shape.rows, c, layer), size_of(shape.cols, c, layer));
  } else if (!t.empty()) {
    throw Error("'" + path + "': tensor '" + t.name + "' (" + std::string(label) + ") is not part of the architecture");
  }
}

// A sparse layer's num_experts routed experts (a dense layer has none).
void check_experts(const std::string& path, const LayerTensors& l, const ModelConfig& c, int layer) {
  const size_t wanted = c.is_sparse(layer) ? static_cast<size_t>(c.num_experts) : 0;
  if (l.experts.size() != wanted) {
    throw Error("'" + path + "': router '" + l[LayerTensor::kRouter].name + "' has " + std::to_string(l.experts.size()) +
                " experts, the config says " + std::to_string(wanted));
  }
  for (const ExpertTensors& e : l.experts) {
    for (const ExpertTensorRow& row : expert_tensor_rows()) check_row(path, e[row.kind], row.label, row.present(c), row.shape, c);
  }
}

void check_moe_config(const ModelConfig& c, const std::string& path) {
  if (!c.is_moe() && c.layer_sparse.empty()) return;
  check_range(path, "num_experts", c.num_experts, kMaxExperts);
  check_range(path, "experts_per_token", c.experts_per_token, c.num_experts);
  check_range(path, "expert_hidden_dim", c.expert_hidden_dim, 1 << 20);
  if (c.shared_expert_hidden_dim < 0 || c.shared_expert_hidden_dim > (1 << 20)) {
    throw Error("'" + path + "': shared_expert_hidden_dim = " + std::to_string(c.shared_expert_hidden_dim) + " is out of range");
  }
  if (static_cast<int>(c.layer_sparse.size()) != c.num_layers) {
    throw Error("'" + path + "': " + std::to_string(c.layer_sparse.size()) + " sparse-layer flags for " +
                std::to_string(c.num_layers) + " layers");
  }
}

// The short-conv and Mamba-2 layers' sizes (hybrid models that have them).
void check_ssm_config(const ModelConfig& c, const std::string& path) {
  auto has = [&](LayerKind kind) { return std::find(c.layer_kinds.begin(), c.layer_kinds.end(), kind) != c.layer_kinds.end(); };
  if (has(LayerKind::kShortConv)) check_range(path, "short conv kernel (conv_L_cache)", c.short_conv_kernel, 1 << 10);
  if (has(LayerKind::kMamba2)) {
    const Mamba2Sizes& m = c.mamba;
    check_range(path, "Mamba-2 heads", m.num_heads, 1 << 14);
    check_range(path, "Mamba-2 head dim", m.head_dim, 1 << 12);
    check_range(path, "Mamba-2 state size", m.state_size, 1 << 12);
    check_range(path, "Mamba-2 groups", m.num_groups, m.num_heads);
    check_range(path, "Mamba-2 conv kernel", m.conv_kernel, 1 << 10);
    if (m.num_heads % m.num_groups != 0) {
      throw Error("'" + path + "': Mamba-2 heads " + std::to_string(m.num_heads) + " is not a multiple of its groups " +
                  std::to_string(m.num_groups));
    }
    if (!(m.dt_min >= 0.0f) || !(m.dt_max >= 0.0f)) throw Error("'" + path + "': the Mamba-2 dt limits must be non-negative");
  }
  if (!(c.residual_scale > 0.0f) || !(c.logit_divisor > 0.0f) || !std::isfinite(c.residual_scale) ||
      !std::isfinite(c.logit_divisor)) {
    throw Error("'" + path + "': the residual multiplier and the logits scaling must be positive");
  }
}

// Partial rotary, the layer kinds and the DeltaNet sizes (hybrid models).
void check_hybrid_config(const ModelConfig& c, const std::string& path) {
  if (c.rotary_dim < 0 || c.rotary_dim > c.head_dim || c.rotary_dim % 2 != 0) {
    throw Error("'" + path + "': rotary_dim " + std::to_string(c.rotary_dim) + " must be even and at most head_dim " +
                std::to_string(c.head_dim));
  }
  if (c.layer_kinds.empty()) return;
  if (static_cast<int>(c.layer_kinds.size()) != c.num_layers) {
    throw Error("'" + path + "': " + std::to_string(c.layer_kinds.size()) + " layer kinds for " + std::to_string(c.num_layers) +
                " layers");
  }
  check_ssm_config(c, path);
  if (std::find(c.layer_kinds.begin(), c.layer_kinds.end(), LayerKind::kDeltaNet) == c.layer_kinds.end()) return;
  const DeltaNetSizes& d = c.deltanet;
  check_range(path, "linear_num_key_heads", d.num_k_heads, 1 << 12);
  check_range(path, "linear_num_value_heads", d.num_v_heads, 1 << 12);
  check_range(path, "linear_key_head_dim", d.k_head_dim, 1 << 12);
  check_range(path, "linear_value_head_dim", d.v_head_dim, 1 << 12);
  check_range(path, "linear_conv_kernel_dim", d.conv_kernel, 1 << 10);
  if (d.num_v_heads % d.num_k_heads != 0) {
    throw Error("'" + path + "': linear_num_value_heads " + std::to_string(d.num_v_heads) +
                " is not a multiple of linear_num_key_heads " + std::to_string(d.num_k_heads));
  }
}

// Gemma 4's global layers' geometry, the shared K/V sources (an earlier layer of the same kind and window
// that keeps its own cache) and the per-layer inputs.
void check_gemma4_config(const ModelConfig& c, const std::string& path) {
  if (c.global_head_dim != 0) check_range(path, "global_head_dim", c.global_head_dim, 1 << 12);
  if (c.global_head_dim % 2 != 0) throw Error("'" + path + "': global_head_dim " + std::to_string(c.global_head_dim) + " is odd");
  if (c.global_kv_heads != 0) check_range(path, "global K/V heads", c.global_kv_heads, c.num_heads);
  if (c.num_heads % std::max(c.global_kv_heads, 1) != 0) {
    throw Error("'" + path + "': num_heads " + std::to_string(c.num_heads) + " is not a multiple of the global layers' K/V heads " +
                std::to_string(c.global_kv_heads));
  }
  if (!(c.global_rope_fraction >= 0.0f && c.global_rope_fraction <= 1.0f)) {
    throw Error("'" + path + "': the global layers' partial_rotary_factor must be between 0 and 1");
  }
  if (c.per_layer_dim < 0 || c.per_layer_dim > (1 << 14)) {
    throw Error("'" + path + "': per-layer input size " + std::to_string(c.per_layer_dim) + " is out of range");
  }
  if (c.layer_kv_source.empty()) return;
  if (static_cast<int>(c.layer_kv_source.size()) != c.num_layers) {
    throw Error("'" + path + "': " + std::to_string(c.layer_kv_source.size()) + " K/V sources for " + std::to_string(c.num_layers) + " layers");
  }
  for (int l = 0; l < c.num_layers; ++l) {
    const int s = c.kv_source(l);
    const bool ok = s == l || (s >= 0 && s < l && c.writes_kv(s) && c.is_attention(s) && c.is_attention(l) &&
                               c.window(s) == c.window(l) && c.head_dim_of(s) == c.head_dim_of(l));
    if (!ok) {
      throw Error("'" + path + "': layer " + std::to_string(l) + " cannot read the K/V of layer " + std::to_string(s) +
                  " (it must be an earlier attention layer of the same kind that keeps its own)");
    }
  }
}

}  // namespace

void check_model_config(const ModelConfig& c, const std::string& path) {
  check_range(path, "dim", c.dim, 1 << 17);
  check_range(path, "hidden_dim", c.hidden_dim, 1 << 20);
  check_range(path, "num_layers", c.num_layers, 1 << 12);
  check_range(path, "num_heads", c.num_heads, 1 << 12);
  check_range(path, "num_kv_heads", c.num_kv_heads, c.num_heads);
  check_range(path, "head_dim", c.head_dim, 1 << 12);
  check_range(path, "vocab_size", c.vocab_size, 1 << 22);
  check_range(path, "max_context", c.max_context, 1 << 24);
  if (c.num_heads % c.num_kv_heads != 0) {
    throw Error("'" + path + "': num_heads " + std::to_string(c.num_heads) +
                " is not a multiple of num_kv_heads " + std::to_string(c.num_kv_heads));
  }
  if (c.head_dim % 2 != 0) throw Error("'" + path + "': head_dim " + std::to_string(c.head_dim) + " is odd");
  if (!(c.rms_eps > 0.0f) || !(c.rope_theta > 0.0f) || !std::isfinite(c.rope_theta)) {
    throw Error("'" + path + "': rms_eps and rope_theta must be positive");
  }
  if (!c.layer_window.empty() && static_cast<int>(c.layer_window.size()) != c.num_layers) {
    throw Error("'" + path + "': " + std::to_string(c.layer_window.size()) + " layer windows for " +
                std::to_string(c.num_layers) + " layers");
  }
  if (!c.layer_nope.empty() && static_cast<int>(c.layer_nope.size()) != c.num_layers) {
    throw Error("'" + path + "': " + std::to_string(c.layer_nope.size()) + " NoPE flags for " +
                std::to_string(c.num_layers) + " layers");
  }
  check_moe_config(c, path);
  check_hybrid_config(c, path);
  check_gemma4_config(c, path);
  for (float v : {c.attn_scale, c.attn_softcap, c.final_softcap, c.rope_theta_local, c.embedding_scale}) {
    if (!(v >= 0.0f) || !std::isfinite(v)) throw Error("'" + path + "': a scale, softcap or RoPE base is invalid");
  }
}

TensorView row_slice(const TensorView& t, int64_t row_begin, int64_t num_rows) {
  if (row_begin < 0 || num_rows < 0 || row_begin + num_rows > t.rows || t.data == nullptr) {
    throw Error("tensor '" + t.name + "' has " + std::to_string(t.rows) + " rows, too few for rows [" +
                std::to_string(row_begin) + ", " + std::to_string(row_begin + num_rows) + ") of its parts");
  }
  TensorView part = t;
  part.name = t.name + "[" + std::to_string(row_begin) + ":" + std::to_string(row_begin + num_rows) + "]";
  part.rows = num_rows;
  part.data = static_cast<const uint8_t*>(t.data) + row_begin * row_bytes(t.dtype, t.cols);
  return part;
}

// The dtype holding the most weight elements (a Q4_0 file keeps its norms in F32); a tied lm_head once.
std::string dominant_dtype(const ModelTensors& t) {
  std::map<DType, int64_t> elements;
  auto count = [&](const TensorView& v) {
    if (!v.empty()) elements[v.dtype] += v.numel();
  };
  for (const ModelTensorRow& row : model_tensor_rows()) {
    const bool tied = row.kind == ModelTensor::kLmHead && t[row.kind].data == t[ModelTensor::kEmbedding].data;
    if (!tied) count(t[row.kind]);
  }
  for (const LayerTensors& l : t.layers) {
    for (const TensorView& v : l.items) count(v);
    for (const ExpertTensors& e : l.experts) {
      for (const TensorView& v : e.items) count(v);
    }
  }
  auto best = std::max_element(elements.begin(), elements.end(),
                               [](const auto& a, const auto& b) { return a.second < b.second; });
  return std::string(dtype_name(best->first));
}

void validate_model_tensors(const Model& model) {
  const ModelConfig& c = model.config;
  const ModelTensors& t = model.tensors;
  if (static_cast<int>(t.layers.size()) != c.num_layers) {
    throw Error("'" + model.path + "' has " + std::to_string(t.layers.size()) + " layers, the config says " +
                std::to_string(c.num_layers));
  }
  for (const ModelTensorRow& row : model_tensor_rows()) {
    check_row(model.path, t[row.kind], row.label, row.present(c), row.shape, c);
  }
  for (int i = 0; i < c.num_layers; ++i) {
    const LayerTensors& l = t.layers[static_cast<size_t>(i)];
    for (const LayerTensorRow& row : layer_tensor_rows()) {
      check_row(model.path, l[row.kind], row.label, row.present(c, i), row.shape, c, i);
    }
    check_experts(model.path, l, c, i);
  }
  if (model.tokenizer && model.tokenizer->vocab_size() > c.vocab_size) {
    throw Error("'" + model.path + "': the tokenizer has " + std::to_string(model.tokenizer->vocab_size()) +
                " tokens, more than the model's vocab_size " + std::to_string(c.vocab_size));
  }
}

}  // namespace cbatch
