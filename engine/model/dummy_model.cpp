// dummy:CONFIG.json: a Hugging Face config.json with random weights and the byte tokenizer, to run
// real model shapes without their weights. Tensor k (0 embedding, then per layer attn_norm, wq, wk, wv,
// wo, ffn_norm, gate, up, down (a sparse layer: router (and its bias), experts' gate, up, down (and their
// biases), shared expert), the family's extras (biases, q/k and sandwich norms, output bias, sinks), then
// final_norm, lm_head) draws from seed f(dummy_seed, k); --dummy-dtype q8_0 marks the linear ones for a backend
// to keep quantized in Q8_0 blocks, --dummy-dtype mxfp4 makes the routed experts' gate, up and down MXFP4
// blocks (as gpt-oss ships them; random_weights.hpp), --dummy-layers keeps the config's first layers. Scales
// give unit-variance activations: linear weights uniform with scale sqrt(3 / in_features) (MXFP4 experts:
// about the same rms), embeddings scale 1, norm weights 1 + uniform(0.1). Nothing is allocated: backends
// generate the values.
#include <cmath>

#include "engine/base/error.hpp"
#include "engine/model/hf_config.hpp"
#include "engine/model/model_formats.hpp"
#include "engine/model/random_weights.hpp"
#include "engine/text/tokenizer_loaders.hpp"

namespace cbatch {
namespace {

constexpr std::string_view kPrefix = "dummy:";

std::string config_path(const ModelSource& source) {
  std::string_view path = source.path;
  if (path.substr(0, kPrefix.size()) == kPrefix) path.remove_prefix(kPrefix.size());
  if (path.empty())
    throw Error("'" + source.path + "': a dummy model needs a config path, dummy:CONFIG.json");
  return std::string(path);
}

class RandomTensors {
 public:
  // --dummy-dtype: mxfp4 keeps the other linear weights in fp32
  RandomTensors(uint64_t dummy_seed, DType dummy_dtype)
      : base_seed_(splitmix64(dummy_seed)),
        linear_dtype_(dummy_dtype == DType::kMXFP4 ? DType::kF32 : dummy_dtype),
        expert_dtype_(dummy_dtype) {}

  TensorView make(std::string name, int64_t rows, int64_t cols, float scale, float offset) {
    TensorView v;
    v.name = std::move(name);
    v.rows = rows;
    v.cols = cols;
    v.is_random = true;
    v.random = {splitmix64(base_seed_ + next_index_++), scale, offset};
    return v;
  }
  TensorView linear(std::string name, int64_t out_features, int64_t in_features) {
    TensorView v = make(std::move(name), out_features, in_features,
                        std::sqrt(3.0f / static_cast<float>(in_features)), 0.0f);
    v.dtype = linear_dtype_;
    return v;
  }
  // A routed expert's gate, up or down weight.
  TensorView expert(std::string name, int64_t out_features, int64_t in_features) {
    TensorView v = linear(std::move(name), out_features, in_features);
    v.dtype = expert_dtype_;
    return v;
  }
  // Norm weights multiply by about 1 whatever the family's offset (Gemma's (1 + w) gets w near 0).
  TensorView norm(std::string name, int64_t dim, float norm_offset) {
    return make(std::move(name), 1, dim, 0.1f, 1.0f - norm_offset);
  }
  TensorView bias(std::string name, int64_t dim) { return make(std::move(name), 1, dim, 0.1f, 0.0f); }

 private:
  uint64_t base_seed_;
  DType linear_dtype_;  // the block type a backend keeps linear weights in, or kF32
  DType expert_dtype_;  // the same for routed experts; kMXFP4: generated as MXFP4 blocks
  uint64_t next_index_ = 0;
};

// The tensors only some families have, drawn after the Llama ones so that a Llama's seeds are unchanged.
void add_family_tensors(RandomTensors& r, const ModelConfig& c, const std::string& p, LayerTensors& l) {
  if (c.qkv_bias) {
    l.bq = r.bias(p + "self_attn.q_proj.bias", c.q_dim());
    l.bk = r.bias(p + "self_attn.k_proj.bias", c.kv_dim());
    l.bv = r.bias(p + "self_attn.v_proj.bias", c.kv_dim());
  }
  if (c.qk_norm) {
    l.q_norm = r.norm(p + "self_attn.q_norm.weight", c.qk_norm_whole ? c.q_dim() : c.head_dim, c.norm_offset);
    l.k_norm = r.norm(p + "self_attn.k_norm.weight", c.qk_norm_whole ? c.kv_dim() : c.head_dim, c.norm_offset);
  }
  if (c.sandwich_norms) {
    l.post_attn_norm = r.norm(p + "post_attention_norm.weight", c.dim, c.norm_offset);
    l.post_ffn_norm = r.norm(p + "post_feedforward_layernorm.weight", c.dim, c.norm_offset);
  }
  if (c.o_bias) l.bo = r.bias(p + "self_attn.o_proj.bias", c.dim);
  if (c.attn_sinks) l.sinks = r.bias(p + "self_attn.sinks", c.num_heads);
}

// A sparse layer's router and experts (and shared expert), in place of the dense FFN.
void add_experts(RandomTensors& r, const ModelConfig& c, const std::string& p, LayerTensors& l) {
  l.router = r.linear(p + "mlp.gate.weight", c.num_experts, c.dim);
  auto expert = [&](const std::string& e, int width) {
    return ExpertTensors{r.expert(e + "gate_proj.weight", width, c.dim), r.expert(e + "up_proj.weight", width, c.dim),
                         r.expert(e + "down_proj.weight", c.dim, width), {}, {}, {}};
  };
  if (c.router_bias) l.router_bias = r.bias(p + "mlp.gate.bias", c.num_experts);
  for (int e = 0; e < c.num_experts; ++e) {
    const std::string name = p + "mlp.experts." + std::to_string(e) + ".";
    l.experts.push_back(expert(name, c.expert_hidden_dim));
    if (!c.expert_bias) continue;
    ExpertTensors& x = l.experts.back();
    x.gate_bias = r.bias(name + "gate_proj.bias", c.expert_hidden_dim);
    x.up_bias = r.bias(name + "up_proj.bias", c.expert_hidden_dim);
    x.down_bias = r.bias(name + "down_proj.bias", c.dim);
  }
  if (c.shared_expert_hidden_dim > 0) {  // not routed: a plain linear weight
    const std::string e = p + "mlp.shared_expert.";
    const int width = c.shared_expert_hidden_dim;
    l.shared_expert = {r.linear(e + "gate_proj.weight", width, c.dim), r.linear(e + "up_proj.weight", width, c.dim),
                       r.linear(e + "down_proj.weight", c.dim, width), {}, {}, {}};
    l.shared_expert_gate = r.linear(p + "mlp.shared_expert_gate.weight", 1, c.dim);
  }
}

ModelTensors make_tensors(const ModelConfig& c, const ModelSource& source) {
  RandomTensors r(source.dummy_seed, source.dummy_dtype);
  ModelTensors t;
  t.embedding = r.make("model.embed_tokens.weight", c.vocab_size, c.dim, 1.0f, 0.0f);
  for (int i = 0; i < c.num_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    LayerTensors l;
    const float off = c.norm_offset;
    l.attn_norm = r.norm(p + "input_layernorm.weight", c.dim, off);
    l.wq = r.linear(p + "self_attn.q_proj.weight", c.q_dim(), c.dim);
    l.wk = r.linear(p + "self_attn.k_proj.weight", c.kv_dim(), c.dim);
    l.wv = r.linear(p + "self_attn.v_proj.weight", c.kv_dim(), c.dim);
    l.wo = r.linear(p + "self_attn.o_proj.weight", c.dim, c.q_dim());
    l.ffn_norm = r.norm(p + "post_attention_layernorm.weight", c.dim, off);
    if (c.is_sparse(i)) {
      add_experts(r, c, p, l);
    } else {
      l.w_gate = r.linear(p + "mlp.gate_proj.weight", c.hidden_dim, c.dim);
      l.w_up = r.linear(p + "mlp.up_proj.weight", c.hidden_dim, c.dim);
      l.w_down = r.linear(p + "mlp.down_proj.weight", c.dim, c.hidden_dim);
    }
    add_family_tensors(r, c, p, l);
    t.layers.push_back(std::move(l));
  }
  t.final_norm = r.norm("model.norm.weight", c.dim, c.norm_offset);
  t.lm_head = c.tied_embeddings ? t.embedding : r.linear("lm_head.weight", c.vocab_size, c.dim);
  return t;
}

// The config's first dummy_layers layers (a quick run of a large shape).
ModelConfig keep_layers(ModelConfig c, const ModelSource& source) {
  const int n = source.dummy_layers;
  if (n == 0) return c;
  if (n < 0 || n > c.num_layers) {
    throw Error("--dummy-layers " + std::to_string(n) + ": '" + source.path + "' has " + std::to_string(c.num_layers) +
                " layers");
  }
  c.num_layers = n;
  if (!c.layer_window.empty()) c.layer_window.resize(static_cast<size_t>(n));
  if (!c.layer_sparse.empty()) c.layer_sparse.resize(static_cast<size_t>(n));
  return c;
}

// --dummy-dtype mxfp4 makes routed experts of 32-element blocks along their input features.
void check_mxfp4_experts(const ModelConfig& c, const ModelSource& source) {
  if (source.dummy_dtype != DType::kMXFP4) return;
  if (!c.is_moe()) {
    throw Error("--dummy-dtype mxfp4: '" + source.path + "' has no experts (mxfp4 applies to routed expert weights)");
  }
  for (int in_features : {c.dim, c.expert_hidden_dim}) {
    if (in_features % 32 == 0) continue;
    throw Error("--dummy-dtype mxfp4: '" + source.path + "' has experts with " + std::to_string(in_features) +
                " input features, not a multiple of the 32 of an MXFP4 block");
  }
}

}  // namespace

Model load_dummy_model(const ModelSource& source) {
  const HfConfig hf = read_hf_config(config_path(source));
  Model model;
  model.path = source.path;
  model.format = "dummy";
  model.weight_dtype = "random";
  if (source.dummy_dtype != DType::kF32) model.weight_dtype.append(" ").append(dtype_name(source.dummy_dtype));
  model.config = keep_layers(hf.config, source);
  check_mxfp4_experts(model.config, source);
  model.tensors = make_tensors(model.config, source);
  model.tokenizer = make_byte_tokenizer(hf.config.vocab_size, hf.bos_id, hf.eos_ids);
  return model;
}

std::unique_ptr<Tokenizer> load_dummy_model_tokenizer(const ModelSource& source) {
  const HfConfig hf = read_hf_config(config_path(source));
  return make_byte_tokenizer(hf.config.vocab_size, hf.bos_id, hf.eos_ids);
}

}  // namespace cbatch
