// The checks and helpers every format loader shares: the config sanity limits (they keep size
// arithmetic far from int64 overflow), every tensor's shape against the config, row slices of fused
// tensors and the dominant dtype. The loaders call these; nothing here knows a format.
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

void check_shape(const std::string& path, const TensorView& t, const char* role, int64_t rows, int64_t cols) {
  if (t.empty()) throw Error("'" + path + "': tensor '" + t.name + "' (" + role + ") has no data");
  if (t.rows != rows || t.cols != cols) {
    throw Error("'" + path + "': tensor '" + t.name + "' (" + role + ") has shape (" +
                std::to_string(t.rows) + ", " + std::to_string(t.cols) + "), the config needs (" +
                std::to_string(rows) + ", " + std::to_string(cols) + ")");
  }
}

// A tensor the family has must be there with its shape; one it lacks must not be (nothing would read it).
void check_optional(const std::string& path, const TensorView& t, const char* role, bool wanted, int64_t rows,
                    int64_t cols) {
  if (wanted) {
    if (t.empty()) throw Error("'" + path + "': the " + role + " tensor of the architecture is missing");
    check_shape(path, t, role, rows, cols);
  } else if (!t.empty()) {
    throw Error("'" + path + "': tensor '" + t.name + "' (" + role + ") is not part of the architecture");
  }
}

void check_expert(const std::string& path, const ExpertTensors& e, int64_t dim, int64_t width, bool biased) {
  check_shape(path, e.gate, "expert gate", width, dim);
  check_shape(path, e.up, "expert up", width, dim);
  check_shape(path, e.down, "expert down", dim, width);
  check_optional(path, e.gate_bias, "expert gate bias", biased, 1, width);
  check_optional(path, e.up_bias, "expert up bias", biased, 1, width);
  check_optional(path, e.down_bias, "expert down bias", biased, 1, dim);
}

// A sparse layer's router, its num_experts experts and the shared expert where the config has one.
void check_sparse_ffn(const std::string& path, const LayerTensors& l, const ModelConfig& c) {
  check_shape(path, l.router, "router", c.num_experts, c.dim);
  check_optional(path, l.router_bias, "router bias", c.router_bias, 1, c.num_experts);
  if (static_cast<int>(l.experts.size()) != c.num_experts) {
    throw Error("'" + path + "': router '" + l.router.name + "' has " + std::to_string(l.experts.size()) +
                " experts, the config says " + std::to_string(c.num_experts));
  }
  for (const ExpertTensors& e : l.experts) check_expert(path, e, c.dim, c.expert_hidden_dim, c.expert_bias);
  if (c.shared_expert_hidden_dim > 0) {
    check_expert(path, l.shared_expert, c.dim, c.shared_expert_hidden_dim, false);
    check_shape(path, l.shared_expert_gate, "shared expert gate", 1, c.dim);
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
  check_moe_config(c, path);
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

// The dtype holding the most weight elements (a Q4_0 file keeps its norms in F32).
std::string dominant_dtype(const ModelTensors& t) {
  std::map<DType, int64_t> elements;
  auto count = [&](const TensorView& v) { elements[v.dtype] += v.numel(); };
  count(t.embedding);
  for (const TensorView* v : {&t.final_norm, &t.position_embedding, &t.token_type_embedding}) {
    if (!v->empty()) count(*v);
  }
  if (!t.lm_head.empty() && t.lm_head.data != t.embedding.data) count(t.lm_head);
  for (const LayerTensors& l : t.layers) {
    const ExpertTensors& s = l.shared_expert;
    for (const TensorView* v : {&l.router, &l.router_bias, &s.gate, &s.up, &s.down, &l.shared_expert_gate}) {
      if (!v->empty()) count(*v);
    }
    for (const ExpertTensors& e : l.experts) {
      for (const TensorView* v : {&e.gate, &e.up, &e.down, &e.gate_bias, &e.up_bias, &e.down_bias}) {
        if (!v->empty()) count(*v);
      }
    }
    for (const TensorView* v : {&l.attn_norm, &l.wq, &l.wk, &l.wv, &l.wo, &l.ffn_norm, &l.w_gate, &l.w_up,
                                &l.w_down, &l.bq, &l.bk, &l.bv, &l.q_norm, &l.k_norm, &l.post_attn_norm,
                                &l.post_ffn_norm, &l.attn_norm_bias, &l.ffn_norm_bias, &l.bo, &l.b_up, &l.b_down, &l.sinks}) {
      if (!v->empty()) count(*v);
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
  check_shape(model.path, t.embedding, "embedding", c.vocab_size, c.dim);
  for (size_t i = 0; i < t.layers.size(); ++i) {
    const LayerTensors& l = t.layers[i];
    check_shape(model.path, l.attn_norm, "attn_norm", 1, c.dim);
    check_shape(model.path, l.wq, "wq", c.q_dim(), c.dim);
    check_shape(model.path, l.wk, "wk", c.kv_dim(), c.dim);
    check_shape(model.path, l.wv, "wv", c.kv_dim(), c.dim);
    check_shape(model.path, l.wo, "wo", c.dim, c.q_dim());
    check_shape(model.path, l.ffn_norm, "ffn_norm", 1, c.dim);
    if (c.is_sparse(static_cast<int>(i))) {
      check_sparse_ffn(model.path, l, c);
    } else {
      check_optional(model.path, l.w_gate, "w_gate", c.gated_ffn, c.hidden_dim, c.dim);
      check_shape(model.path, l.w_up, "w_up", c.hidden_dim, c.dim);
      check_shape(model.path, l.w_down, "w_down", c.dim, c.hidden_dim);
    }
    check_optional(model.path, l.bq, "q bias", c.qkv_bias, 1, c.q_dim());
    check_optional(model.path, l.bk, "k bias", c.qkv_bias, 1, c.kv_dim());
    check_optional(model.path, l.bv, "v bias", c.qkv_bias, 1, c.kv_dim());
    check_optional(model.path, l.q_norm, "q_norm", c.qk_norm, 1, c.qk_norm_whole ? c.q_dim() : c.head_dim);
    check_optional(model.path, l.k_norm, "k_norm", c.qk_norm, 1, c.qk_norm_whole ? c.kv_dim() : c.head_dim);
    check_optional(model.path, l.post_attn_norm, "post_attn_norm", c.sandwich_norms, 1, c.dim);
    check_optional(model.path, l.post_ffn_norm, "post_ffn_norm", c.sandwich_norms, 1, c.dim);
    check_optional(model.path, l.attn_norm_bias, "attn_norm bias", c.layer_norm, 1, c.dim);
    check_optional(model.path, l.ffn_norm_bias, "ffn_norm bias", c.layer_norm, 1, c.dim);
    check_optional(model.path, l.bo, "output projection bias", c.o_bias, 1, c.dim);
    check_optional(model.path, l.sinks, "attention sinks", c.attn_sinks, 1, c.num_heads);
    check_optional(model.path, l.b_up, "up bias", !c.gated_ffn, 1, c.hidden_dim);
    check_optional(model.path, l.b_down, "down bias", !c.gated_ffn, 1, c.dim);
  }
  check_optional(model.path, t.final_norm, "final_norm", !c.post_norm, 1, c.dim);
  check_optional(model.path, t.lm_head, "lm_head", c.has_lm_head, c.vocab_size, c.dim);
  check_optional(model.path, t.position_embedding, "position embedding", c.learned_positions,
                 c.max_context + c.position_offset, c.dim);
  if (c.token_types && (t.token_type_embedding.empty() || t.token_type_embedding.cols != c.dim)) {
    throw Error("'" + model.path + "': the token type embedding of the architecture is missing or not (types, dim)");
  }
  check_optional(model.path, t.pooler, "pooler", c.is_cross_encoder(), c.dim, c.dim);
  check_optional(model.path, t.pooler_bias, "pooler bias", c.is_cross_encoder(), 1, c.dim);
  check_optional(model.path, t.classifier, "classifier", c.is_cross_encoder(), c.num_labels, c.dim);
  check_optional(model.path, t.classifier_bias, "classifier bias", c.is_cross_encoder(), 1, c.num_labels);
  check_optional(model.path, t.embedding_norm, "embedding norm", c.post_norm, 1, c.dim);
  check_optional(model.path, t.embedding_norm_bias, "embedding norm bias", c.post_norm && c.layer_norm, 1, c.dim);
  if (model.tokenizer && model.tokenizer->vocab_size() > c.vocab_size) {
    throw Error("'" + model.path + "': the tokenizer has " + std::to_string(model.tokenizer->vocab_size()) +
                " tokens, more than the model's vocab_size " + std::to_string(c.vocab_size));
  }
}

}  // namespace cbatch
